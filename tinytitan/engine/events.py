"""The one event stream every protocol encoder consumes.

A generation yields ``ReasoningDelta`` / ``TextDelta`` pieces in order, a ``ToolCall`` for each
complete call, and exactly one ``Finished`` last. A request with a tool search the server runs
(``engine/tool_search``) also yields a ``ToolSearched`` where each search ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Event", "Finished", "ReasoningDelta", "Source", "TextDelta", "ToolCall", "ToolSearched", "Usage"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where the client wrote a value: its path, and how its protocol spells the fields inside it.

    ``Source("messages[1].tool_calls[0]", {"name": "function.name"}).at("name")`` is
    ``"messages[1].tool_calls[0].function.name"``. Mappers build these; the validator names errors
    with them, so every error is in the client's own spelling without the engine knowing protocols.
    """

    path: str
    spelling: Mapping[str, str] = field(default_factory=dict)

    def at(self, name: str) -> str:
        spelled = self.spelling.get(name, name)
        return f"{self.path}.{spelled}" if self.path else spelled


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
    """A tool call: one the model just made (an event), or one from the conversation's history.

    ``arguments`` is JSON text — or, for a call of a ``custom`` tool (``type`` ``custom``), the tool's
    freeform input as the model wrote it; ``source`` says where a client sent it (history only).
    """

    id: str
    name: str
    arguments: str
    namespace: str | None = None
    source: Source | None = None
    type: str = "function"  # or "custom": a freeform tool's call, its input in ``arguments``


@dataclass(frozen=True, slots=True)
class ToolSearched:
    """A tool search the server ran for the model: its ``call`` (the search tool's name and arguments),
    the names of the tools it revealed, best first — or, when it failed, ``error`` (a code:
    ``invalid_tool_input``) and ``detail``."""

    call: ToolCall
    found: tuple[str, ...] = ()
    error: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """``reason``: ``stop`` (end of turn or a stop string), ``length`` (the cap), ``tool_calls``."""

    reason: str
    usage: Usage = field(default_factory=Usage)
    stop_sequence: str | None = None


Event = ReasoningDelta | TextDelta | ToolCall | ToolSearched | Finished
