"""The one event stream every protocol encoder consumes.

A generation yields ``ReasoningDelta`` / ``TextDelta`` pieces in order, a ``ToolCall`` for each
complete call, and exactly one ``Finished`` last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Event", "Finished", "ReasoningDelta", "TextDelta", "ToolCall", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.completion_tokens + other.completion_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments_json: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """``reason``: ``stop`` (end of turn or a stop string), ``length`` (the cap), ``tool_calls``."""

    reason: str
    usage: Usage = field(default_factory=Usage)
    stop_sequence: str | None = None


Event = ReasoningDelta | TextDelta | ToolCall | Finished
