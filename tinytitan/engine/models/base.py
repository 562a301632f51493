"""The Backend contract every model implements (design.md, docs/architecture.md).

A backend renders a validated request into a prompt and counts its tokens (any thread: no MLX), and
on the device thread loads its weights and opens the ``Batch`` the device worker steps. It never
parses its own output: the ``Job`` turns the tokens the batch hands back into text with the
backend's ``Decoder`` and feeds it through the shared ``OutputParser`` with the backend's
``markers`` and ``tool_parser``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinytitan.engine.errors import Unsupported
from tinytitan.engine.kv.form import KvForm
from tinytitan.engine.output.parser import (
    QWEN_MARKERS,
    EventParser,
    Markers,
    OutputParser,
    ParseOptions,
    ToolParser,
    json_tool_parser,
)
from tinytitan.engine.request import ModelInfo, ValidatedRequest

if TYPE_CHECKING:
    from tinytitan.engine.device.batch import Batch

__all__ = ["Backend", "Decoder", "Generation", "Prompt", "TextDecoder"]


@dataclass(slots=True)
class Prompt:
    text: str
    n_tokens: int
    tokens: Any = None  # the backend's own token ids, when it has them
    start_in_reasoning: bool = False  # the template opened a thought (the prompt ends inside <think>)
    vision: Any = None  # a prompt with images: what the device needs for them (``device.images.VisionPrompt``)


@dataclass(slots=True)
class Generation:
    """One generation: the validated request, its rendered prompt and the token budget
    ``max_new = min(cap, context - prompt)``; the device reports the prompt-cache hit in ``cached_tokens``."""

    request: ValidatedRequest
    prompt: Prompt
    max_new: int
    cached_tokens: int = 0


class Decoder(ABC):
    """Generated tokens → text, incrementally (one per generation, on the event loop)."""

    @abstractmethod
    def feed(self, tokens: Sequence[Any]) -> str:
        """The text ``tokens`` complete (a multi-byte character may wait for the next token)."""

    @abstractmethod
    def finish(self) -> str:
        """Whatever text is still held back at the end."""


class TextDecoder(Decoder):
    """Tokens that are text already (the scripted backend's)."""

    def feed(self, tokens: Sequence[Any]) -> str:
        return "".join(str(t) for t in tokens)

    def finish(self) -> str:
        return ""


class Backend(ABC):
    has_tokenizer: bool = True  # False: count_tokens answers 501 (generation is unaffected)
    kv: KvForm | None = None  # the KV cache's quantized form (--kv-bits); None: full precision

    def kv_token_bytes(self) -> int:
        """Bytes one token of context takes in this model's KV cache, every layer (0: none, or unknown)."""
        return 0

    def kv_cached_bytes(self) -> int:
        """Bytes of KV snapshots this model's prompt cache holds in memory."""
        return 0

    def bound_kv_cache(self, room: Callable[[int], int]) -> None:  # noqa: B027 - optional hook
        """From now on the prompt cache holds at most ``room(what it holds)`` bytes (the KV memory budget)."""

    @property
    def markers(self) -> Markers:
        """The family's reasoning and tool-call markers (Qwen's unless the backend knows better)."""
        return QWEN_MARKERS

    @property
    def tool_parser(self) -> ToolParser:
        """The family's tool-call parser (the ``<tool_call>`` JSON one unless the backend knows better)."""
        return json_tool_parser

    @property
    @abstractmethod
    def info(self) -> ModelInfo:
        """The served model's facts; must not load weights."""

    @property
    def note(self) -> str | None:
        """Why this model is served when it is not what was asked for (the embedded fallback), else None."""
        return None

    @property
    def loaded(self) -> bool:
        return True

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load the weights (on the device thread)."""

    def unload(self, *, keep_prompt_cache: bool = False) -> bool:
        """Release the weights; True when something was resident.

        ``keep_prompt_cache`` (a catalog switching to another model) keeps the KV snapshots, so a
        switch back finds its prefixes warm; a plain unload releases them too.
        """
        return False

    def output_parser(self, options: ParseOptions) -> EventParser:
        """The parser this model's raw output goes through, told of the request by ``options``."""
        return OutputParser(options, markers=self.markers, tool_parser=self.tool_parser)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Finish background work (e.g. prompt-cache writes) before the process exits."""

    def count_text(self, text: str) -> int:
        """Tokens ``text`` takes in this model's own tokenizer (no template applied).

        Used to measure a compaction note against its budget. A backend without a tokenizer raises
        ``Unsupported``; callers may then fall back to an estimate.
        """
        raise Unsupported("this backend cannot count tokens")

    @abstractmethod
    def render(self, request: ValidatedRequest) -> Prompt:
        """The chat template applied to the request (may raise ``Unsupported`` without a tokenizer)."""

    @abstractmethod
    def open_batch(self) -> Batch:
        """The batch the device worker steps for this model (on the device thread, after ``load``)."""

    def decoder(self) -> Decoder:
        """A fresh decoder for one generation's tokens."""
        return TextDecoder()
