"""The Responses stream's events (reference §11) as msgspec structs. Pure data.

Every event names its kind in ``type`` (written first) and carries its ``sequence_number``; the five
lifecycle events carry the response as it stands (``wire.Response``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from tinytitan.api.wire import OpenAIErrorBody, Tagged

from .wire import OutputItem, OutputText, Response, SummaryText

__all__ = [
    "STREAM_EVENTS",
    "ContentPartAdded",
    "ContentPartDone",
    "CustomToolCallInputDelta",
    "CustomToolCallInputDone",
    "FunctionCallArgumentsDelta",
    "FunctionCallArgumentsDone",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextDelta",
    "OutputTextDone",
    "ReasoningSummaryPartAdded",
    "ReasoningSummaryPartDone",
    "ReasoningSummaryTextDelta",
    "ReasoningSummaryTextDone",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseQueued",
    "SocketError",
]


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
