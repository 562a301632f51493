"""Steering a tiny random model toward short, finished tool inputs (the freeform property tests).

A random model writes lines that never end: it picks among the allowed tokens about uniformly, and
most tokens carry no newline. The grammar, not the model, is what the property tests hold to account,
so a test may push the model's logits anywhere: ``steer`` adds a fixed bias (newlines, ``*``, closing
punctuation, the call's end marker) before the backend's own grammar mask, which still decides what
may be written. For a chosen call it also writes the call's head first — a model that decides to call
the tool — and leaves the rest to the mask the engine built for the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinytitan.engine.device.batch import Row
from tinytitan.engine.grammar.calls import call_head
from tinytitan.engine.models.mlx import MlxBackend

__all__ = ["END_TEXT", "JSON_SYNTAXES", "steer"]

JSON_SYNTAXES = frozenset({"json_tools", "mistral", "kimi_k2", "harmony"})
END_TEXT = {
    "json_tools": '"}}\n</tool_call>',
    "qwen3_coder": "\n</parameter>\n</function>\n</tool_call>",
    "glm47": "</arg_value></tool_call>",
    "gemma4": '<|"|>}<tool_call|>',
    "kimi_k2": '"}<|tool_call_end|><|tool_calls_section_end|>',
    "mistral": '"}',
    "harmony": '"}',
}


def _bias(backend: MlxBackend) -> np.ndarray:
    lt = backend.lltokenizer
    syntax = backend.syntax or ""
    newline = b"\\n" if syntax in JSON_SYNTAXES else b"\n"  # a JSON string writes its newlines escaped
    bias = np.zeros(lt.vocab_size, dtype=np.float32)
    for token in range(lt.vocab_size):
        text = bytes(lt.decode_bytes([token]))
        bias[token] += (18.0 if syntax in JSON_SYNTAXES else 6.0) * (newline in text)
        bias[token] += 12.0 * text.startswith(b"*") + 8.0 * (text[:1] in (b";", b")", b'"'))
    for token in set(backend.tokenizer.encode(END_TEXT[syntax], add_special_tokens=False)):
        bias[token] += 10.0
    return bias


def steer(backend: MlxBackend, *, chosen: str | None = None) -> list[Any]:
    """Steer every row ``backend`` opens from now on; ``chosen``: write a call of that tool's head first.

    Returns the list the rows' own grammar masks are appended to (a test reads what they did)."""
    import mlx.core as mx

    bias = _bias(backend)
    newlines = "{function-name}\n<arg_key>" in backend.template
    head = call_head(backend.syntax or "", chosen, newlines=newlines) if chosen else ""
    head_ids = backend.tokenizer.encode(head, add_special_tokens=False) if head else []
    masks: list[Any] = []
    own: Callable[[Row], Any] = backend._row_mask

    def row_mask(row: Row) -> Any:
        inner = own(row)
        masks.append(inner)
        pending = list(head_ids)

        def processor(tokens: Any, logits: Any) -> Any:
            width = logits.shape[-1]
            out = logits + mx.array(np.pad(bias, (0, max(0, width - bias.size)))[:width])
            out = inner(tokens, out) if inner is not None else out
            if pending:  # the model "decides" to call the tool: its head, token by token
                forced = np.full(width, -np.inf, dtype=np.float32)
                forced[pending.pop(0)] = 0.0
                return mx.broadcast_to(mx.array(forced).astype(logits.dtype), logits.shape)
            return out

        return processor

    backend._row_mask = row_mask  # type: ignore[method-assign]
    return masks
