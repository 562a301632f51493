"""Responses answers (reference §9, §11) as msgspec structs: the response object and its output
items (the stream's events are in ``wire_events.py``). Pure data.

Items and parts name their kind in ``type`` (written first). What a request echoes as it sent it
(tools, ``text.format``, ``tool_choice``, ``metadata``) stays plain JSON.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tinytitan.api.wire import UNSET, Answer, Tagged, UnsetType

__all__ = [
    "Compaction",
    "CompactionItem",
    "CustomToolCallItem",
    "Deleted",
    "FunctionCallItem",
    "IncompleteDetails",
    "InputText",
    "InputTokens",
    "InputTokensDetails",
    "MessageItem",
    "OutputItem",
    "OutputText",
    "OutputTokensDetails",
    "ReasoningItem",
    "Response",
    "ResponseError",
    "ResponseReasoning",
    "ResponseText",
    "ResponsesUsage",
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
