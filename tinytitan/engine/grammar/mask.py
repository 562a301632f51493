"""Grammar-constrained decoding for the mlx backend (issue #6): llguidance masks the sampler.

``GrammarMask`` is a logits processor for ``mlx_lm.generate.generate_step``. At every step it feeds
the token sampled last into an ``llguidance.LLMatcher``, asks the matcher which tokens may come
next (an int32 bitmask, computed into a numpy buffer), unpacks that into a boolean vector on the
CPU (vectorised, no loop over the vocabulary) and applies it with ``mx.where(mask, logits, -inf)``.
llguidance's own mlx helper needs Metal, so the mask is built with numpy here.

Rows of the logits past the tokenizer's vocabulary (embedding padding) are always masked. Once the
matcher accepts — the document or the call is complete — only end-of-turn tokens are allowed, so
generation ends cleanly instead of wandering on; a cap that cuts the document short is
``finish_reason: length``, as for any other generation.

Which grammar a request needs is the models stage's to decide (``models/grammar.py``); this module
knows grammars and token ids only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from tinytitan.engine.errors import GenerationFailed
from tinytitan.engine.grammar.schema import lark_literal

__all__ = ["GrammarMask", "lark_marker", "make_lltokenizer"]


def make_lltokenizer(tokenizer: Any) -> Any:
    """An ``llguidance.LLTokenizer`` for mlx-lm's ``TokenizerWrapper`` (about a second: cache it)."""
    import llguidance.hf

    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    return llguidance.hf.from_tokenizer(hf)


def lark_marker(lltokenizer: Any, tokenizer: Any, text: str) -> str:
    """``text`` as a Lark expression: ``<[id]>`` when it is one special token, else a literal."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    token_id = hf.convert_tokens_to_ids(text)
    if isinstance(token_id, int) and token_id != hf.unk_token_id and lltokenizer.is_special_token(token_id):
        return f"<[{token_id}]>"
    return lark_literal(text)


class GrammarMask:
    """A ``generate_step`` logits processor that only lets the grammar's tokens through."""

    def __init__(self, lltokenizer: Any, grammar: str, end_tokens: Iterable[int]) -> None:
        import llguidance

        self.matcher = llguidance.LLMatcher(lltokenizer, grammar)
        if self.matcher.is_error():
            raise GenerationFailed(f"cannot start the output grammar: {self.matcher.get_error()}")
        self.end_tokens = np.array(sorted({*end_tokens, lltokenizer.eos_token}), dtype=np.int64)
        self._words = np.zeros((1, (lltokenizer.vocab_size + 31) // 32), dtype=np.int32)
        self._started = False
        self.mask_seconds: list[float] = []  # time spent building each step's mask (benchmarks)

    @property
    def done(self) -> bool:
        return bool(self.matcher.is_accepting() or self.matcher.is_stopped())

    def consume(self, token: int) -> None:
        if self.done or token in self.end_tokens:
            return  # the end-of-turn token that closes a complete document
        if not self.matcher.consume_token(token):
            raise GenerationFailed(f"the sampler left the output grammar: {self.matcher.get_error()}")

    def allowed(self, vocab: int) -> np.ndarray:
        """Boolean vector over the logits' ``vocab`` rows: True where the grammar allows the token."""
        from llguidance.numpy import fill_next_token_bitmask

        allowed = np.zeros(vocab, dtype=bool)
        if self.done:
            allowed[self.end_tokens[self.end_tokens < vocab]] = True
            return allowed
        fill_next_token_bitmask(self.matcher, self._words)
        bits = np.unpackbits(self._words.view(np.uint8), bitorder="little")
        n = min(vocab, bits.size)
        allowed[:n] = bits[:n].astype(bool)
        return allowed

    def __call__(self, tokens: Any, logits: Any) -> Any:
        import mlx.core as mx

        if self._started:
            self.consume(int(tokens[-1].item()))
        self._started = True
        began = time.perf_counter()
        mask = mx.array(self.allowed(logits.shape[-1]))
        self.mask_seconds.append(time.perf_counter() - began)
        return mx.where(mask, logits, mx.array(-mx.inf, dtype=logits.dtype))
