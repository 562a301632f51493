"""The protocol-neutral request.

``ChatRequest`` is what every protocol mapper produces: the client's values as sent (still
unchecked), spelled our way. ``ValidatedRequest`` is what the one validator returns: defaults
applied, guidance merged, levels resolved. Only mappers build the first; only
``tinytitan.engine.validate`` builds the second.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ChatRequest",
    "Message",
    "ModelInfo",
    "OutputFormat",
    "ParamNames",
    "Part",
    "ReasoningControls",
    "Sampling",
    "Tool",
    "ToolCallSpec",
    "Turn",
    "ValidatedRequest",
    "new_request_id",
]


def new_request_id() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Part:
    """A content part; only ``text`` parts reach a model."""

    type: str
    text: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """A tool call the assistant made earlier in the conversation (arguments as JSON text)."""

    id: str
    name: str
    arguments: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str | tuple[Part, ...] | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    tool_call_id: str | None = None
    reasoning: str | None = None  # thoughts a client sends back: accepted, never rendered
    source: str | None = None  # where the client wrote it (e.g. "messages[3].content[1]"), when mapping moved it


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None
    namespace: str | None = None
    type: str = "function"


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ReasoningControls:
    """Where a request asks for a reasoning level (reference §5), in precedence order."""

    effort: str | None = None  # top-level reasoning_effort / reasoning.effort
    template_effort: str | None = None  # chat_template_kwargs.reasoning_effort
    enable_thinking: bool | None = None  # chat_template_kwargs.enable_thinking
    budget_tokens: int | None = None  # reasoning_budget_tokens: accepted, not enforced
    level: str | None = None  # a ladder level a mapper already decided (Messages' thinking)


@dataclass(frozen=True, slots=True)
class ParamNames:
    """How the client's protocol spells the fields the validator may name in an error."""

    messages: str = "messages"
    max_tokens: str = "max_tokens"
    max_completion_tokens: str = "max_completion_tokens"
    stop: str = "stop"
    tools: str = "tools"
    tool_prefix: str = "function."  # where a tool's name and schema sit inside tools[i]
    tool_schema: str = "parameters"
    tool_call_id: str = "tool_call_id"  # the field of a tool result naming the call it answers
    tool_choice: str = "tool_choice"
    temperature: str = "temperature"
    top_p: str = "top_p"
    top_k: str = "top_k"
    seed: str = "seed"
    response_format: str = "response_format"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: Any = None
    sampling: Sampling = field(default_factory=Sampling)
    stop: str | tuple[str, ...] | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    clamp_max_tokens: bool = False  # Messages: a cap above the context window is clamped
    temperature_max: float = 2.0  # Messages: 1.0
    reasoning: ReasoningControls = field(default_factory=ReasoningControls)
    response_format: Any = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    stream: bool = False
    include_usage: bool | None = None
    workspace: str | None = None
    request_id: str = field(default_factory=new_request_id)
    params: ParamNames = field(default_factory=ParamNames)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the validator needs to know about the served model, without loading it."""

    id: str
    context_window: int
    defaults: dict[str, Any] = field(default_factory=dict)  # generation_config sampling defaults
    reasoning_levels: tuple[str, ...] = ("off", "on")  # what its template renders; () = no switch
    default_reasoning: str | None = "on"
    forced_tool_calls: bool = False  # whether the backend can force a tool call


@dataclass(frozen=True, slots=True)
class Turn:
    """A validated conversation turn: role user / assistant / tool, text only."""

    role: str
    text: str = ""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # for a tool turn: the function it answers


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """``json_object`` or ``json_schema`` (with its schema); plain text is ``None``."""

    type: str
    schema: dict[str, Any] | None = None
    name: str | None = None
    grammar: str | None = None  # the llguidance grammar the decoder masks with


@dataclass(frozen=True, slots=True)
class ValidatedRequest:
    request: ChatRequest
    model_id: str
    system: str | None
    turns: tuple[Turn, ...]
    tools: tuple[Tool, ...]
    tool_choice: str
    sampling: Sampling
    stop: tuple[str, ...]
    cap: int
    reasoning_level: str | None
    output_format: OutputFormat | None = None
    strip_cli: bool = False
    forced_tool: str | None = None  # name when a specific function is forced

    @property
    def request_id(self) -> str:
        return self.request.request_id
