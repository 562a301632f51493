"""The protocol-neutral request.

``ChatRequest`` is what every protocol mapper produces: the client's values as sent (still
unchecked), spelled our way. ``ValidatedRequest`` is what the one validator returns: defaults
applied, guidance merged, levels resolved. Only mappers build the first; only
``tinytitan.engine.request.validate`` builds the second.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from tinytitan.engine.events import Source, ToolCall
from tinytitan.engine.request.image_check import ImageRef
from tinytitan.engine.request.images import Image

__all__ = [
    "ChatRequest",
    "FormatRequest",
    "Freeform",
    "Image",
    "Message",
    "ModelInfo",
    "OutputFormat",
    "Part",
    "ReasoningControls",
    "Sampling",
    "Source",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "Turn",
    "ValidatedRequest",
    "new_id",
    "new_request_id",
    "tool_source",
]


def new_id(prefix: str = "") -> str:
    """A fresh random id: ``prefix`` and 32 hex digits (request ids, and every protocol's wire ids)."""
    return prefix + secrets.token_hex(16)


def new_request_id() -> str:
    return new_id()


@dataclass(frozen=True, slots=True)
class Part:
    """A content part: ``text`` parts; in a tool message, ``tool_reference`` parts (``text`` is the
    tool's name), which the validator expands into the tool's definition; and ``image`` parts
    (``image``: the checked picture), which reach only a model with vision input. A mapper leaves an
    image as ``ref`` (what the client sent); ``image_load.load_images`` checks it into ``image``."""

    type: str
    text: str | None = None
    source: Source | None = None
    image: Image | None = None
    ref: ImageRef | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """A neutral message. ``source`` is where the client wrote it (its own path and spelling);
    messages the server builds itself have none and are named ``<messages param>[i]``."""

    role: str
    content: str | tuple[Part, ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: str | None = None  # thoughts a client sends back: the template decides whether to render them
    source: Source | None = None
    server: bool = False  # the server's own text (an instruction, a compaction note): never stripped


@dataclass(frozen=True, slots=True)
class Freeform:
    """A ``custom`` tool's input format as the client sent it: ``text`` (any input) or ``grammar``
    (``syntax`` ``lark`` / ``regex`` and its ``definition``). ``compiled`` is the validator's: the
    ``grammar.freeform.InputGrammar`` every call's input is held to."""

    type: str = "text"
    syntax: str | None = None
    definition: str | None = None
    compiled: Any = None


@dataclass(frozen=True, slots=True)
class Tool:
    """A function tool (``parameters``: its JSON schema), or a ``custom`` (freeform) tool: one whose
    input is text in its ``format`` (issue 38). ``deferred`` (``defer_loading``): left out of the
    prompt's tool list until the conversation reveals it (``request/deferred.py``). ``search``: a tool
    search the server runs itself (``regex``, ``bm25`` or ``openai``; ``tool_search/``), None for a
    client's tool."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None
    namespace: str | None = None
    type: str = "function"
    source: Source | None = None
    deferred: bool = False
    search: str | None = None
    namespace_description: str | None = None  # what a namespace says of its tools (Responses)
    format: Freeform | None = None  # a custom tool's input format

    @property
    def custom(self) -> bool:
        return self.type == "custom"


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``auto`` / ``none`` / ``required`` / ``function`` (with ``name``: a function or a custom
    tool), as the client asked it; ``allowed`` the names an ``allowed_tools`` choice keeps.

    Each mapper reads its protocol's spelling (Chat's ``{"type": "function", "function": …}``,
    Responses' ``{"type": "function", "name"}``, ``{"type": "custom", "name"}``, ``allowed_tools``,
    Anthropic's ``any`` / ``tool``) into this.
    """

    mode: str
    name: str | None = None
    param: str = "tool_choice"
    allowed: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class FormatRequest:
    """A structured-output request as the client asked it (reference §6), before compiling.

    ``type`` is whatever the client wrote (the validator refuses the unknown ones by name);
    plain text is no ``FormatRequest`` at all. ``param`` is where the format object sits
    (``response_format``, ``text.format``, ``output_config.format``) and ``schema_param`` where its
    schema does.
    """

    type: str
    param: str
    schema_param: str
    schema: Any = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None  # from the model's generation_config only (no protocol has it)
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
class ChatRequest:
    """The client's values as sent (still unchecked), with where the client wrote them.

    ``messages_param``, ``cap_param`` and ``stop_param`` name the request's top-level fields whose
    spelling differs between protocols (``input``, ``max_output_tokens``, ``stop_sequences``, …).
    """

    model: str
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] | None = None
    max_tokens: int | None = None
    temperature_max: float = 2.0  # Messages: 1.0
    top_p_zero: bool = False  # Messages: top_p 0 is in range ([0, 1] rather than (0, 1])
    reasoning: ReasoningControls = field(default_factory=ReasoningControls)
    output_format: FormatRequest | None = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    stream: bool = False
    include_usage: bool | None = None
    workspace: str | None = None
    internal: bool = False  # the server's own pass (compaction): memory never decorates it
    loop_guard: bool = False  # watch for a verbatim loop even under a cap of its own (``loops.py``)
    request_id: str = field(default_factory=new_request_id)
    messages_param: str = "messages"
    cap_param: str = "max_tokens"
    stop_param: str = "stop"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the validator needs to know about the served model, without loading it."""

    id: str
    context_window: int
    defaults: dict[str, Any] = field(default_factory=dict)  # sampling defaults: the model's, or a serve flag's
    defaults_from: dict[str, str] = field(default_factory=dict)  # where each came from (``engine.request.defaults``)
    reasoning_levels: tuple[str, ...] = ("off", "on")  # what its template renders; () = no switch
    default_reasoning: str | None = "on"
    forced_tool_calls: bool = False  # whether the backend can force a tool call
    freeform_grammars: bool = False  # whether its calls can hold a custom tool's input to a grammar
    tool_calls: bool = True  # whether it has a tool-call syntax (False: no tools or memory in its prompts)
    vision: bool = False  # whether it takes images (a vision-language model, or a script that says so)


@dataclass(frozen=True, slots=True)
class Turn:
    """A validated conversation turn: role user / assistant / tool. ``text`` is its whole text;
    ``parts`` is empty for a text-only turn and, for a turn with images (vision models only), holds
    its text pieces and ``Image`` objects in the client's order (their text joined is ``text``)."""

    role: str
    text: str = ""
    parts: tuple[str | Image, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # for a tool turn: the function it answers
    reasoning: str | None = None  # an assistant turn's thoughts as the client sent them back


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
    sampling_from: dict[str, str] = field(default_factory=dict)  # where each sampling value came from
    tool_calls: bool = True  # the model's ``ModelInfo.tool_calls``
    deferred: tuple[Tool, ...] = ()  # tools left out of the prompt until revealed (``request/deferred.py``)
    revealed: tuple[Tool, ...] = ()  # the deferred tools the conversation revealed: callable, not in ``tools``

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def callable_tools(self) -> tuple[Tool, ...]:
        """What the model may call: the tools its prompt lists, and the deferred ones revealed so far."""
        return self.tools + self.revealed


_TOOL_SPELLING = {"name": "function.name", "parameters": "function.parameters"}


def tool_source(tool: Tool, i: int) -> Source:
    """Where the client wrote ``tool`` (``tools[i]`` in Chat spelling when the mapper kept it there)."""
    return tool.source or Source(f"tools[{i}]", _TOOL_SPELLING)
