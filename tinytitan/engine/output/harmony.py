"""gpt-oss's harmony format, parsed by OpenAI's ``openai-harmony`` package (issue #18).

A gpt-oss answer is a run of messages, each on a channel: ``analysis`` (the reasoning),
``commentary`` (tool calls, addressed ``to=functions.NAME``, and user-visible preambles) and
``final`` (the answer). ``HarmonyParser`` feeds the generated text, re-encoded with the harmony
encoding, to ``openai_harmony.StreamableParser`` and turns what it reads into the same events as
``OutputParser``: analysis → reasoning, final and preambles → visible text (stop strings applied
there), calls → ``ToolCall``. Text the harmony parser cannot place (a model that breaks the format)
is shown as visible text, never dropped.

The encoding needs OpenAI's ``o200k_base.tiktoken``, which ``openai-harmony`` downloads and checks by
SHA-256. gpt-oss's own ``tokenizer.json`` holds the same ranks, so ``load_encoding`` first rebuilds
the file from the model directory (offline) and points ``TIKTOKEN_ENCODINGS_BASE`` at it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from tinytitan.engine.events import ReasoningDelta
from tinytitan.engine.output.parser import NO_OPTIONS, Markers, OutputParser, ParseOptions, make_call, partial_suffix

__all__ = [
    "HARMONY_MARKERS",
    "O200K_FILE",
    "O200K_SHA256",
    "HarmonyParser",
    "is_harmony",
    "load_encoding",
    "o200k_from_tokenizer",
]

log = logging.getLogger("tinytitan.harmony")

O200K_FILE = "o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_SIZE = 199998  # ranks; the harmony tokens follow
HARMONY_MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>")
_NO_MARKERS = Markers(None, None, None, None)


def is_harmony(template: str) -> bool:
    """Whether a chat template speaks harmony (gpt-oss)."""
    return all(m in template for m in ("<|start|>", "<|channel|>", "<|message|>", "<|call|>"))


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character a tokenizer.json uses → the byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(keep)
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


def o200k_from_tokenizer(tokenizer_json: Path) -> str | None:
    """``o200k_base.tiktoken``'s text rebuilt from a gpt-oss ``tokenizer.json``; None if it is not that."""
    try:
        vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    decode = _byte_decoder()
    ranks: list[str | None] = [None] * O200K_SIZE
    for token, rank in vocab.items():
        if isinstance(rank, int) and 0 <= rank < O200K_SIZE:
            try:
                ranks[rank] = base64.b64encode(bytes(decode[c] for c in token)).decode()
            except KeyError:
                return None
    if any(r is None for r in ranks):
        return None
    text = "".join(f"{token} {rank}\n" for rank, token in enumerate(ranks))
    return text if hashlib.sha256(text.encode()).hexdigest() == O200K_SHA256 else None


def load_encoding(model_dir: Path, cache_dir: Path) -> Any:
    """The harmony encoding; the vocabulary comes from the model itself when it can (no download)."""
    from openai_harmony import HarmonyEncodingName, HarmonyError, load_harmony_encoding

    if not os.environ.get("TIKTOKEN_ENCODINGS_BASE"):
        target = cache_dir / O200K_FILE
        if not target.exists():
            text = o200k_from_tokenizer(model_dir / "tokenizer.json")
            if text is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, target)
        if target.exists():
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(cache_dir)
    try:
        return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except HarmonyError as exc:
        raise RuntimeError(
            f"the harmony encoding (gpt-oss) needs OpenAI's {O200K_FILE}: it is not in {model_dir}'s "
            f"tokenizer.json and could not be downloaded ({exc}); set TIKTOKEN_ENCODINGS_BASE to a "
            f"directory that holds it"
        ) from exc


class HarmonyParser:
    """``OutputParser``'s interface over ``openai_harmony.StreamableParser``."""

    def __init__(self, encoding: Any, options: ParseOptions = NO_OPTIONS) -> None:
        from openai_harmony import Role, StreamableParser

        self.encoding = encoding
        self.parser = StreamableParser(encoding, role=Role.ASSISTANT)
        # stop strings and leading blanks (the channels are harmony's, never <think> markers)
        self.visible = OutputParser(ParseOptions(stop=options.stop), markers=_NO_MARKERS)
        self.namespaces = options.namespaces
        self.options = options
        self.broken = False  # the model left the format: the rest is shown as text
        self.header = ""  # raw text of a message header not yet read to its content
        self.held = ""  # a piece's tail that may be the start of a harmony token
        self.shown = 0  # characters of the current message's content already emitted
        self.done = 0  # messages already turned into events
        self.tool_calls = 0
        self.reasoning_tokens = 0
        self.completion_tokens = 0

    @property
    def stopped(self) -> str | None:
        return self.visible.stopped

    def feed(self, piece: str, tokens: int = 1) -> list[Any]:
        channel = self.parser.current_channel
        events = self._process(piece)
        self.completion_tokens += tokens
        if "analysis" in (channel, self.parser.current_channel):
            self.reasoning_tokens += tokens
        return events

    def finish(self) -> list[Any]:
        events: list[Any] = []
        if self.held:
            events.extend(self._process("", final=True))
        if not self.broken and self.stopped is None:
            from openai_harmony import HarmonyError, StreamState

            if self.parser.state == StreamState.HEADER and self.parser.tokens:
                events.extend(self._give_up(""))
            else:
                try:
                    self.parser.process_eos()  # <|call|> / <|return|> end generation: the backend keeps them
                    events.extend(self._drain())
                except HarmonyError:
                    events.extend(self._give_up(""))
        events.extend(self.visible.finish())
        return events

    # -- internals ------------------------------------------------------------------------------
    def _process(self, piece: str, *, final: bool = False) -> list[Any]:
        piece, self.held = self.held + piece, ""  # a harmony token split across pieces is encoded whole
        if self.broken:
            return self.visible.feed(piece, 0)
        from openai_harmony import HarmonyError, StreamState

        keep = 0 if final else partial_suffix(piece, HARMONY_MARKERS)
        piece, self.held = piece[: len(piece) - keep], piece[len(piece) - keep :]
        events: list[Any] = []
        for token in self.encoding.encode(piece, allowed_special="all"):
            try:
                self.parser.process(token)
            except HarmonyError:
                events.extend(self._give_up(piece))
                return events
            if self.parser.state == StreamState.CONTENT:
                self.header = ""
            events.extend(self._drain())
        if self.parser.state != StreamState.CONTENT:
            self.header += piece
        return events

    def _give_up(self, piece: str) -> list[Any]:
        log.warning("the model left the harmony format; showing the rest as text")
        self.broken = True
        return self.visible.feed(self.header + piece, 0)

    def _drain(self) -> list[Any]:
        """Events for messages completed since the last call and for the open message's new text."""
        events: list[Any] = []
        messages = self.parser.messages
        while self.done < len(messages):
            message = messages[self.done]
            text = "".join(getattr(c, "text", "") for c in message.content)
            events.extend(self._message_end(message.channel, message.recipient, text))
            self.done += 1
            self.shown = 0
        content = self.parser.current_content or ""
        if len(content) > self.shown and not self._is_call(self.parser.current_recipient):
            events.extend(self._text(self.parser.current_channel, content[self.shown :]))
            self.shown = len(content)
        return events

    @staticmethod
    def _is_call(recipient: str | None) -> bool:
        return bool(recipient) and recipient not in ("assistant", "user")

    def _text(self, channel: str | None, text: str) -> list[Any]:
        if channel == "analysis":
            return [ReasoningDelta(text)] if text else []
        return self.visible.feed(text, 0)

    def _message_end(self, channel: str | None, recipient: str | None, text: str) -> list[Any]:
        if not self._is_call(recipient):
            return self._text(channel, text[self.shown :])
        assert recipient is not None
        name = recipient.split(".", 1)[1] if recipient.startswith("functions.") else recipient
        try:
            args = json.loads(text) if text.strip() else {}
            if not isinstance(args, dict):
                raise ValueError
            call = make_call(name, args, self.options)
        except ValueError:
            return self.visible.feed(f"to={recipient} {text}", 0)
        self.tool_calls += 1
        return [call]
