"""The Backend contract every decoder implements (design.md).

A backend renders a validated request into a prompt, counts its tokens, and generates raw model
text piece by piece in a worker thread. It never parses its own output: the engine feeds the raw
pieces through the shared ``OutputParser`` with the backend's ``markers`` and ``tool_parser``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tinytitan.engine.errors import Unsupported
from tinytitan.engine.output_parser import QWEN_MARKERS, Markers, ToolParser, json_tool_parser
from tinytitan.engine.request import ModelInfo, OutputFormat, Sampling, ValidatedRequest

__all__ = ["Backend", "GenerationParams", "GenerationStats", "Piece", "Prompt"]


@dataclass(slots=True)
class Prompt:
    text: str
    n_tokens: int
    tokens: Any = None  # the backend's own token ids, when it has them
    start_in_reasoning: bool = False  # the template opened a thought (the prompt ends inside <think>)


@dataclass(frozen=True, slots=True)
class GenerationParams:
    sampling: Sampling
    max_new: int
    output_format: OutputFormat | None = None
    tool_choice: str = "auto"
    forced_tool: str | None = None


@dataclass(slots=True)
class GenerationStats:
    """Filled in by the backend while it runs."""

    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Piece:
    """Raw model text and how many generated tokens it took; ``finish`` overrides the end reason."""

    text: str
    tokens: int = 1
    finish: str | None = None


class Backend(ABC):
    markers: Markers = QWEN_MARKERS
    tool_parser: ToolParser = staticmethod(json_tool_parser)

    @property
    @abstractmethod
    def info(self) -> ModelInfo:
        """The served model's facts; must not load weights."""

    @property
    def loaded(self) -> bool:
        return True

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load the weights (called off the event loop, on the generation thread)."""

    def unload(self) -> bool:
        """Release the weights; True when something was resident."""
        return False

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
    def generate(
        self,
        request: ValidatedRequest,
        prompt: Prompt,
        params: GenerationParams,
        cancel: threading.Event,
        stats: GenerationStats,
    ) -> Iterator[Piece]:
        """Yield raw pieces; check ``cancel`` before every token."""
