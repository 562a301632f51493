"""Responses answers (reference §9, §11) as msgspec structs: the response object, its output items
and every stream event. Pure data.

Items, parts and events name their kind in ``type`` (written first). Every stream event carries its
``sequence_number``; the five lifecycle events carry the response as it stands. What a request
echoes as it sent it (tools, ``text.format``, ``tool_choice``, ``metadata``) stays plain JSON.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tinytitan.api.wire import UNSET, Answer, OpenAIErrorBody, Tagged, UnsetType

__all__ = [
    "STREAM_EVENTS",
    "Compaction",
    "CompactionItem",
    "ContentPartAdded",
    "ContentPartDone",
    "CustomToolCallInputDelta",
    "CustomToolCallInputDone",
    "CustomToolCallItem",
    "Deleted",
    "FunctionCallArgumentsDelta",
    "FunctionCallArgumentsDone",
    "FunctionCallItem",
    "IncompleteDetails",
    "InputText",
    "InputTokens",
    "InputTokensDetails",
    "MessageItem",
    "OutputItem",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputText",
    "OutputTextDelta",
    "OutputTextDone",
    "OutputTokensDetails",
    "ReasoningItem",
    "ReasoningSummaryPartAdded",
    "ReasoningSummaryPartDone",
    "ReasoningSummaryTextDelta",
    "ReasoningSummaryTextDone",
    "Response",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseError",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseQueued",
    "ResponseReasoning",
    "ResponseText",
    "ResponsesUsage",
    "SocketError",
    "SummaryText",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
]


# -- output items ------------------------------------------------------------------------------


class SummaryText(Tagged, tag="summary_text"):
    text: str = ""


class OutputText(Tagged, tag="output_text"):
    text: str = ""
    annotations: list[Any] = msgspec.field(default_factory=list)
    logprobs: list[Any] = msgspec.field(default_factory=list)


class InputText(Tagged, tag="input_text"):
    text: str


class ReasoningItem(Tagged, tag="reasoning"):
    id: str
    summary: list[SummaryText] = msgspec.field(default_factory=list)


class MessageItem(Tagged, tag="message", kw_only=True):
    id: str
    role: str = "assistant"
    status: str = "in_progress"
    content: list[OutputText | InputText] = msgspec.field(default_factory=list)


class FunctionCallItem(Tagged, tag="function_call", kw_only=True):
    id: str
    status: str = "in_progress"
    name: str
    arguments: str = ""
    call_id: str
    namespace: str | UnsetType = UNSET


class CustomToolCallItem(Tagged, tag="custom_tool_call", kw_only=True):
    """A call of a custom (freeform) tool: ``input`` is the text the model wrote (issue 38)."""

    id: str
    status: str = "in_progress"
    name: str
    input: str = ""
    call_id: str
    namespace: str | UnsetType = UNSET


class CompactionItem(Tagged, tag="compaction"):
    """The item that carries a compaction note (reference §11): a client sends it back as input."""

    id: str
    encrypted_content: str
    created_by: str = "tinytitan"


class ToolSearchCallItem(Tagged, tag="tool_search_call", kw_only=True):
    """A tool search the model called (issue 39): ``execution`` ``server`` (run here, its output item
    follows) or ``client`` (the client runs it and sends a ``tool_search_output`` back)."""

    id: str
    call_id: str | None
    execution: str
    status: str = "completed"
    arguments: Any


class ToolSearchOutputItem(Tagged, tag="tool_search_output", kw_only=True):
    """What a search the server ran found: the tools' definitions, deferred (namespaces as sent)."""

    id: str
    call_id: str | None
    execution: str = "server"
    status: str = "completed"
    tools: list[dict[str, Any]]


OutputItem = (
    ReasoningItem
    | MessageItem
    | FunctionCallItem
    | CustomToolCallItem
    | CompactionItem
    | ToolSearchCallItem
    | ToolSearchOutputItem
)


# -- the response object -----------------------------------------------------------------------


class InputTokensDetails(Answer):
    cached_tokens: int
    cache_write_tokens: int = 0


class OutputTokensDetails(Answer):
    reasoning_tokens: int


class ResponsesUsage(Answer):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseReasoning(Answer):
    effort: str | None
    summary: str | None


class ResponseText(Answer):
    format: dict[str, Any]
    verbosity: str


class ResponseError(Answer):
    """A failed response's ``error``: ``code`` is one the Responses schema allows."""

    code: str
    message: str


class IncompleteDetails(Answer):
    reason: str


class Response(Answer, kw_only=True):
    """Every field of reference §9, echoing the request; ``output`` grows as the items come."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: str = "in_progress"
    background: bool = False
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None
    max_output_tokens: int | None
    max_tool_calls: int | None
    model: str
    output: list[OutputItem] = msgspec.field(default_factory=list)
    parallel_tool_calls: bool
    previous_response_id: str | None
    prompt_cache_key: str | None
    reasoning: ResponseReasoning
    safety_identifier: str | None
    service_tier: str = "default"
    store: bool
    temperature: float
    top_p: float
    presence_penalty: float
    frequency_penalty: float = 0.0
    text: ResponseText
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    top_logprobs: int = 0
    truncation: str
    usage: ResponsesUsage | None = None
    user: str | None
    metadata: dict[str, str]


class Compaction(Answer, kw_only=True):
    """``POST /v1/responses/compact``'s answer (reference §11)."""

    id: str
    object: Literal["response.compaction"] = "response.compaction"
    created_at: int
    output: list[OutputItem]
    usage: ResponsesUsage


class InputTokens(Answer, kw_only=True):
    """``POST /v1/responses/input_tokens``'s answer: what the request's prompt would count."""

    object: Literal["response.input_tokens"] = "response.input_tokens"
    input_tokens: int


class Deleted(Answer):
    id: str
    object: Literal["response"] = "response"
    deleted: bool = True


# -- the event stream ----------------------------------------------------------------------------


class _Event(Tagged, kw_only=True):
    sequence_number: int


class _Lifecycle(_Event, kw_only=True):
    response: Response


class ResponseCreated(_Lifecycle, tag="response.created"):
    """The first event: the response as it starts."""


class ResponseQueued(_Lifecycle, tag="response.queued"):
    """Sent after ``response.created`` when the request waits for a slot (and repeated as the
    keepalive while it waits); ``response.in_progress`` follows when it runs."""


class ResponseInProgress(_Lifecycle, tag="response.in_progress"):
    """Sent after ``response.created``, and again as the keepalive while the next event is slow."""


class ResponseCompleted(_Lifecycle, tag="response.completed"):
    """The last event of a response that finished."""


class ResponseIncomplete(_Lifecycle, tag="response.incomplete"):
    """The last event of a response cut at ``max_output_tokens``."""


class ResponseFailed(_Lifecycle, tag="response.failed"):
    """The last event of a response that failed: ``error`` says why."""


class _ItemEvent(_Event, kw_only=True):
    output_index: int
    item: OutputItem


class OutputItemAdded(_ItemEvent, tag="response.output_item.added"):
    """An item opens (a function call whole, its arguments still empty)."""


class OutputItemDone(_ItemEvent, tag="response.output_item.done"):
    """An item is finished, as it stands in the output."""


class _InItem(_Event, kw_only=True):
    """An event about one part of the item at ``output_index``."""

    item_id: str
    output_index: int


class _InSummary(_InItem, kw_only=True):
    summary_index: int = 0


class _InContent(_InItem, kw_only=True):
    content_index: int = 0


class _SummaryPart(_InSummary, kw_only=True):
    part: SummaryText


class _ContentPart(_InContent, kw_only=True):
    part: OutputText


class ReasoningSummaryPartAdded(_SummaryPart, tag="response.reasoning_summary_part.added"):
    """A reasoning item's summary part opens."""


class ReasoningSummaryTextDelta(_InSummary, tag="response.reasoning_summary_text.delta", kw_only=True):
    """Text added to a reasoning item's summary."""

    delta: str


class ReasoningSummaryTextDone(_InSummary, tag="response.reasoning_summary_text.done", kw_only=True):
    """The whole text of a reasoning item's summary."""

    text: str


class ReasoningSummaryPartDone(_SummaryPart, tag="response.reasoning_summary_part.done"):
    """A reasoning item's summary part, finished."""


class ContentPartAdded(_ContentPart, tag="response.content_part.added"):
    """A message's text part opens."""


class OutputTextDelta(_InContent, tag="response.output_text.delta", kw_only=True):
    """Text added to a message (``logprobs`` always empty)."""

    delta: str
    logprobs: list[Any] = msgspec.field(default_factory=list)


class OutputTextDone(_InContent, tag="response.output_text.done", kw_only=True):
    """The whole text of a message."""

    text: str
    logprobs: list[Any] = msgspec.field(default_factory=list)


class ContentPartDone(_ContentPart, tag="response.content_part.done"):
    """A message's text part, finished."""


class FunctionCallArgumentsDelta(_InItem, tag="response.function_call_arguments.delta", kw_only=True):
    """A function call's arguments (all of them: a call comes whole)."""

    delta: str


class FunctionCallArgumentsDone(_InItem, tag="response.function_call_arguments.done", kw_only=True):
    """A function call, finished: its name and arguments."""

    name: str
    arguments: str


class CustomToolCallInputDelta(_InItem, tag="response.custom_tool_call_input.delta", kw_only=True):
    """A custom tool call's input (all of it: a call comes whole)."""

    delta: str


class CustomToolCallInputDone(_InItem, tag="response.custom_tool_call_input.done", kw_only=True):
    """A custom tool call's input, finished."""

    input: str


class SocketError(Tagged, tag="error"):
    """A WebSocket error event: the OpenAI envelope's ``error`` with the HTTP status it stands for."""

    status: int
    error: OpenAIErrorBody


STREAM_EVENTS: tuple[type, ...] = (
    ResponseCreated,
    ResponseQueued,
    ResponseInProgress,
    OutputItemAdded,
    ReasoningSummaryPartAdded,
    ReasoningSummaryTextDelta,
    ReasoningSummaryTextDone,
    ReasoningSummaryPartDone,
    ContentPartAdded,
    OutputTextDelta,
    OutputTextDone,
    ContentPartDone,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    CustomToolCallInputDelta,
    CustomToolCallInputDone,
    OutputItemDone,
    ResponseCompleted,
    ResponseIncomplete,
    ResponseFailed,
)
"""Every event a stream sends (``event:`` is its ``type``); a WebSocket sends ``SocketError`` too."""
