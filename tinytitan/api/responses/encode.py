"""Engine events → the Responses object and its event stream (reference §9).

``OutputBuilder`` is the one place output items are made: the stream encoder and the non-streaming
path both feed it the engine's events, so the streamed final object and the plain one are built by
the same code. ``ResponsesStream`` is this protocol's ``Encoder`` (``tinytitan.api.streaming``). Events and
items are ``wire`` structs; an item is never changed once an event carried it (a finished item
replaces the open one), so a snapshot of the response is a shallow copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from tinytitan.api.errors import openai_error
from tinytitan.api.sse import SSE
from tinytitan.api.wire import UNSET, Tagged, kind
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, ToolSearched, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.passes.compaction import CompactionResult
from tinytitan.engine.request import new_id

from .mapping import new_item_id
from .shell import response_shell
from .tool_search import SearchItems
from .wire import (
    Compaction,
    CompactionItem,
    CustomToolCallItem,
    FunctionCallItem,
    IncompleteDetails,
    InputText,
    InputTokensDetails,
    MessageItem,
    OutputItem,
    OutputText,
    OutputTokensDetails,
    ReasoningItem,
    Response,
    ResponseError,
    ResponsesUsage,
    SummaryText,
    ToolSearchCallItem,
)
from .wire_events import (
    ContentPartAdded,
    ContentPartDone,
    CustomToolCallInputDelta,
    CustomToolCallInputDone,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    OutputTextDone,
    ReasoningSummaryPartAdded,
    ReasoningSummaryPartDone,
    ReasoningSummaryTextDelta,
    ReasoningSummaryTextDone,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
    ResponseQueued,
)

__all__ = [
    "OutputBuilder",
    "ResponsesStream",
    "compaction_item",
    "compaction_object",
    "response_shell",
    "usage_object",
]


def usage_object(usage: Usage) -> ResponsesUsage:
    return ResponsesUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(usage.cached_tokens),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(usage.reasoning_tokens),
        total_tokens=usage.total_tokens,
    )


_Open = type[ReasoningItem] | type[MessageItem]


def _never() -> bool:
    return False


class OutputBuilder:
    """Accumulates output items from engine events; each step returns the stream events it implies."""

    def __init__(
        self, shell: Response, waiting: Callable[[], bool] | None = None, tools: list[dict[str, Any]] | None = None
    ) -> None:
        """``waiting``: whether the request still waits for a slot in the queue (none: it never does);
        ``tools``: the request's tools as sent (what a tool search's items say of them)."""
        self.response = shell
        self.searches = SearchItems(tools)
        self._waiting = waiting or _never
        self.queued = False
        self.output: list[OutputItem] = shell.output
        self.sequence = 0
        self._open: int | None = None  # the index of the reasoning or message item being written
        self._buffer: list[str] = []
        self.spent = Usage()  # work before the generation (a server-side compaction): joins its usage

    def _seq(self) -> int:
        self.sequence += 1
        return self.sequence - 1

    def _snapshot(self) -> Response:
        return msgspec.structs.replace(self.response, output=list(self.output))

    def start(self) -> list[Tagged]:
        """``response.created``, then ``response.in_progress`` — or, for a request that must wait for
        a slot, ``response.queued`` (status ``queued``); ``in_progress`` follows when it runs."""
        self.queued = self._waiting()
        if self.queued:
            self.response.status = "queued"
            created = ResponseCreated(sequence_number=self._seq(), response=self._snapshot())
            return [created, ResponseQueued(sequence_number=self._seq(), response=self._snapshot())]
        return [
            ResponseCreated(sequence_number=self._seq(), response=self._snapshot()),
            ResponseInProgress(sequence_number=self._seq(), response=self._snapshot()),
        ]

    def _running(self) -> list[Tagged]:
        """``response.in_progress``, once, when a queued response gets its slot."""
        if not self.queued:
            return []
        self.queued = False
        self.response.status = "in_progress"
        return [ResponseInProgress(sequence_number=self._seq(), response=self._snapshot())]

    def keepalive(self) -> ResponseInProgress | ResponseQueued:
        """A repeated ``response.in_progress`` (``response.queued`` while the request still waits for
        a slot) with the next sequence number: an event the Responses grammar allows at any point of
        a running response and clients ignore, but one their parsers count — Codex's
        ``stream_idle_timeout_ms`` resets only on those. It carries a progress snapshot, small and
        valid: the output as written so far (the open item with its text to date), and not the
        request's echoes that can be large — ``instructions`` is ``null`` and ``tools`` ``[]`` here;
        ``response.created`` and the terminal event carry them."""
        if self.queued and self._waiting():
            return ResponseQueued(sequence_number=self._seq(), response=self._progress())
        if self.queued:
            (running,) = self._running()
            assert isinstance(running, ResponseInProgress)
            return running
        return ResponseInProgress(sequence_number=self._seq(), response=self._progress())

    def _progress(self) -> Response:
        output = list(self.output)
        if self._open is not None:
            item = output[self._open]
            text = "".join(self._buffer)
            if isinstance(item, ReasoningItem):
                output[self._open] = msgspec.structs.replace(item, summary=[SummaryText(text)])
            elif isinstance(item, MessageItem):
                output[self._open] = msgspec.structs.replace(item, content=[OutputText(text)])
        return msgspec.structs.replace(self.response, output=output, instructions=None, tools=[])

    # -- items -------------------------------------------------------------------------------------
    def _added(self, item: OutputItem) -> tuple[int, OutputItemAdded]:
        index = len(self.output)
        self.output.append(item)
        return index, OutputItemAdded(sequence_number=self._seq(), output_index=index, item=item)

    def _done(self, index: int, item: OutputItem) -> OutputItemDone:
        self.output[index] = item
        return OutputItemDone(sequence_number=self._seq(), output_index=index, item=item)

    def _open_item(self, item: ReasoningItem | MessageItem) -> list[Tagged]:
        index, added = self._added(item)
        events: list[Tagged] = [added]
        item_id = item.id
        if isinstance(item, ReasoningItem):
            events.append(
                ReasoningSummaryPartAdded(
                    sequence_number=self._seq(), item_id=item_id, output_index=index, part=SummaryText()
                )
            )
        else:
            events.append(
                ContentPartAdded(sequence_number=self._seq(), item_id=item_id, output_index=index, part=OutputText())
            )
        self._open = index
        self._buffer = []
        return events

    def _close(self, status: str = "completed") -> list[Tagged]:
        """Close the open item; ``status`` is a message's (``incomplete`` when the cap cut it)."""
        index, self._open = self._open, None
        if index is None:
            return []
        item = self.output[index]
        item_id = item.id
        text = "".join(self._buffer)
        events: list[Tagged]
        if isinstance(item, ReasoningItem):
            summary = SummaryText(text)
            item = msgspec.structs.replace(item, summary=[summary])
            events = [
                ReasoningSummaryTextDone(sequence_number=self._seq(), item_id=item_id, output_index=index, text=text),
                ReasoningSummaryPartDone(
                    sequence_number=self._seq(), item_id=item_id, output_index=index, part=summary
                ),
            ]
        else:
            part = OutputText(text)
            item = msgspec.structs.replace(item, content=[part], status=status)
            events = [
                OutputTextDone(sequence_number=self._seq(), item_id=item_id, output_index=index, text=text),
                ContentPartDone(sequence_number=self._seq(), item_id=item_id, output_index=index, part=part),
            ]
        return [*events, self._done(index, item)]

    def _ensure_open(self, kind: _Open) -> list[Tagged]:
        if self._open is not None and isinstance(self.output[self._open], kind):
            return []
        events = self._close()
        item = (
            ReasoningItem(new_item_id("reasoning")) if kind is ReasoningItem else MessageItem(id=new_item_id("message"))
        )
        return events + self._open_item(item)

    def _delta(self, kind: _Open, text: str) -> list[Tagged]:
        events = self._ensure_open(kind)
        assert self._open is not None
        self._buffer.append(text)
        item_id, index = self.output[self._open].id, self._open
        if kind is ReasoningItem:
            events.append(
                ReasoningSummaryTextDelta(sequence_number=self._seq(), item_id=item_id, output_index=index, delta=text)
            )
        else:
            events.append(OutputTextDelta(sequence_number=self._seq(), item_id=item_id, output_index=index, delta=text))
        return events

    def _custom_call(self, call: ToolCall) -> list[Tagged]:
        """A custom tool's call: ``custom_tool_call`` with its input streamed (whole) and done."""
        events = self._close()
        item = CustomToolCallItem(
            id=new_item_id("custom_tool_call"), name=call.name, call_id=call.id, namespace=call.namespace or UNSET
        )
        index, added = self._added(item)
        events.append(added)
        seq = self._seq
        events.append(
            CustomToolCallInputDelta(sequence_number=seq(), item_id=item.id, output_index=index, delta=call.arguments)
        )
        events.append(
            CustomToolCallInputDone(sequence_number=seq(), item_id=item.id, output_index=index, input=call.arguments)
        )
        events.append(self._done(index, msgspec.structs.replace(item, input=call.arguments, status="completed")))
        return events

    def _call(self, call: ToolCall) -> list[Tagged]:
        if call.type == "custom":
            return self._custom_call(call)
        events = self._close()
        item = FunctionCallItem(
            id=new_item_id("function_call"), name=call.name, call_id=call.id, namespace=call.namespace or UNSET
        )
        index, added = self._added(item)
        item_id = item.id
        events.append(added)
        events.append(
            FunctionCallArgumentsDelta(
                sequence_number=self._seq(), item_id=item_id, output_index=index, delta=call.arguments
            )
        )
        done = msgspec.structs.replace(item, arguments=call.arguments, status="completed")
        events.append(
            FunctionCallArgumentsDone(
                sequence_number=self._seq(),
                item_id=item_id,
                output_index=index,
                name=call.name,
                arguments=call.arguments,
            )
        )
        events.append(self._done(index, done))
        return events

    # -- the event stream ----------------------------------------------------------------------------
    def feed(self, event: Event) -> list[Tagged]:
        running = self._running()  # the first event of a queued response: it runs now
        if isinstance(event, ReasoningDelta):
            return running + (self._delta(ReasoningItem, event.text) if event.text else [])
        if isinstance(event, TextDelta):
            return running + (self._delta(MessageItem, event.text) if event.text else [])
        if isinstance(event, ToolCall):
            searching = self.searches.client_call(event)  # a call to the client's own tool_search
            return running + (self._call(event) if searching is None else self._close() + self.whole(searching))
        if isinstance(event, ToolSearched):  # a search the server ran: its call and what it found
            return running + self._close() + [e for item in self.searches.ran(event) for e in self.whole(item)]
        return running + self.finish(event)

    def finish(self, finished: Finished) -> list[Tagged]:
        incomplete = finished.reason == "length"
        status = "incomplete" if incomplete else "completed"  # the item the cap cut says so too
        events = self._close(status)
        if not any(self._answers(item) for item in self.output):
            events += self._ensure_open(MessageItem)  # an answer with no text is an empty message
            events += self._close(status)
        response = self.response
        response.status = "incomplete" if incomplete else "completed"
        response.completed_at = int(time.time())
        response.incomplete_details = IncompleteDetails("max_output_tokens") if incomplete else None
        response.usage = usage_object(finished.usage + self.spent)
        end = ResponseIncomplete if incomplete else ResponseCompleted
        return [*events, end(sequence_number=self._seq(), response=self._snapshot())]

    @staticmethod
    def _answers(item: OutputItem) -> bool:
        """An item that answers: a message, or a call the client runs (a client's tool search too)."""
        client_search = isinstance(item, ToolSearchCallItem) and item.execution == "client"
        return isinstance(item, (MessageItem, FunctionCallItem, CustomToolCallItem)) or client_search

    def whole(self, item: OutputItem) -> list[Tagged]:
        """An item that comes whole (a compaction item): ``output_item.added`` and ``.done`` at once."""
        index, added = self._added(item)
        return [added, self._done(index, item)]

    def completed(self, items: list[OutputItem], usage: Usage) -> list[Tagged]:
        """The end of a turn that generated nothing token by token: each whole item (a compaction
        turn's one ``compaction`` item; none for a WebSocket warm-up), then ``response.completed``."""
        events: list[Tagged] = [event for item in items for event in self.whole(item)]
        self.response.status = "completed"
        self.response.completed_at = int(time.time())
        self.response.usage = usage_object(usage)
        return [*events, ResponseCompleted(sequence_number=self._seq(), response=self._snapshot())]

    def fail(self, exc: TinyTitanError) -> list[Tagged]:
        """``response.failed``: the response's ``error.code`` is one of the few the Responses schema
        allows (``server_error``, ``rate_limit_exceeded``, ``invalid_prompt``), not the envelope's code."""
        status, body = openai_error(exc)
        code = "server_error" if status >= 500 else "rate_limit_exceeded" if status == 429 else "invalid_prompt"
        self._open = None
        self.response.status = "failed"
        self.response.error = ResponseError(code, body.error.message)
        return [ResponseFailed(sequence_number=self._seq(), response=self._snapshot())]


class ResponsesStream:
    """The Responses encoding of one generation: the stream events and the object come from the same
    ``OutputBuilder``. ``on_done`` gets the final object of a generation that finished (completed or
    incomplete), on both paths — the route stores it."""

    def __init__(self, builder: OutputBuilder, on_done: Callable[[Response], None]) -> None:
        self.builder = builder
        self.on_done = on_done

    def done(self) -> None:
        self.on_done(self.builder.response)

    def frames(self, events: list[Tagged]) -> list[SSE]:
        return [SSE(e, event=kind(e)) for e in events]

    def start(self) -> list[SSE]:
        return self.frames(self.builder.start())

    def feed(self, event: Event) -> list[SSE]:
        frames = self.frames(self.builder.feed(event))
        if isinstance(event, Finished):
            self.done()
        return frames

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return self.frames(self.builder.fail(exc))

    def end(self) -> list[SSE]:
        return []

    def keepalive(self) -> SSE:
        event = self.builder.keepalive()
        return SSE(event, event=kind(event))

    def object(self, result: Completion) -> Response:
        for event in result.events:
            self.feed(event)
        return self.builder.response


def compaction_item(result: CompactionResult, *, prunes: bool = False) -> CompactionItem:
    """The ``compaction`` item that carries a note (reference §11): a client sends it back as input.
    ``prunes``: server-side compaction's, standing for everything before it (``passes.payload``)."""
    return CompactionItem(new_id("cmp_"), result.payload(prunes=prunes))


def compaction_object(result: CompactionResult, instructions: str | None) -> Compaction:
    """``POST /v1/responses/compact``'s answer (reference §11); ``tinytitan compact --json`` prints it too."""
    output: list[OutputItem] = []
    if instructions:
        content: list[OutputText | InputText] = [InputText(instructions)]
        output.append(MessageItem(id=new_item_id("message"), role="developer", status="completed", content=content))
    output.append(compaction_item(result))
    return Compaction(
        id=new_id("resp_cmp_"), created_at=int(time.time()), output=output, usage=usage_object(result.usage)
    )
