"""Anthropic Messages ↔ engine (reference §12): engine events → the message object / the SSE stream.

The wire → ``ChatRequest`` half lives in ``mapping`` and is re-exported here. Both encoders are
pure functions over engine events, so they are tested over hand-made event iterators.
"""

from __future__ import annotations

import json
from typing import Any

from tinytitan.api.errors import anthropic_error
from tinytitan.api.sse import SSE
from tinytitan.api.wire import UNSET, UnsetType
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, ToolSearched, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import new_id

from .wire import (
    BlockDelta,
    CompactionBlock,
    CompactionDelta,
    CompactionIteration,
    ContentBlock,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    ContextManagement,
    InputJsonDelta,
    Message,
    MessageDelta,
    MessageIteration,
    MessageStart,
    MessageStop,
    MessagesUsage,
    Ping,
    ServerToolUseBlock,
    SignatureDelta,
    StopDelta,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolReference,
    ToolSearchError,
    ToolSearchResult,
    ToolSearchToolResultBlock,
    ToolUseBlock,
)
from .wire import TextDelta as TextDeltaWire

__all__ = [
    "MessagesStream",
    "message_object",
    "paused_object",
    "stop_reason",
    "tool_use_id",
    "usage_object",
]


# -- the object ---------------------------------------------------------------------------


def tool_use_id(call: ToolCall) -> str:
    """Anthropic-style ids (``toolu_…``) for the engine's calls; the same call always gets the same id."""
    return "toolu_" + call.id.removeprefix("call_")


def usage_object(usage: Usage, compaction: Usage | None = None, *, answered: bool = True) -> MessagesUsage:
    """``usage`` in Anthropic's terms; after a server-side compaction, ``iterations`` too: the compaction's
    passes, then the answer (none when paused) — the top-level fields count the answer alone, as the API's."""
    out = MessagesUsage(
        input_tokens=usage.prompt_tokens - usage.cached_tokens,
        cache_read_input_tokens=usage.cached_tokens,
        output_tokens=usage.completion_tokens,
    )
    if compaction is not None:
        passes = usage_object(compaction)
        out.iterations = [
            CompactionIteration(passes.input_tokens, passes.output_tokens, 0, passes.cache_read_input_tokens)
        ]
        if answered:
            out.iterations.append(MessageIteration(out.input_tokens, out.output_tokens, 0, out.cache_read_input_tokens))
    return out


def stop_reason(finished: Finished, has_calls: bool, window_room: int | None = None) -> tuple[str, str | None]:
    """``(stop_reason, stop_sequence)``: tool_use > max_tokens > stop_sequence > end_turn.

    ``window_room``: the tokens the context window left the answer when that was fewer than
    ``max_tokens`` allowed; an answer cut there stopped at the window, not at ``max_tokens``
    (``model_context_window_exceeded``, as the API reports it)."""
    if has_calls:
        return "tool_use", None
    if finished.reason == "length":
        if window_room is not None and finished.usage.completion_tokens >= window_room:
            return "model_context_window_exceeded", None
        return "max_tokens", None
    if finished.stop_sequence is not None:
        return "stop_sequence", finished.stop_sequence
    return "end_turn", None


def _tool_input(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return {}


def _tool_use_block(call: ToolCall, *, with_input: bool = True) -> ToolUseBlock:
    return ToolUseBlock(tool_use_id(call), call.name, _tool_input(call) if with_input else {})


def _search_blocks(
    event: ToolSearched, *, with_input: bool = True
) -> tuple[ServerToolUseBlock, ToolSearchToolResultBlock]:
    """A search the server ran: its ``server_tool_use`` block (``srvtoolu_…``) and its result."""
    call = event.call
    block_id = "srvtoolu_" + call.id.removeprefix("call_")
    use = ServerToolUseBlock(block_id, call.name, _tool_input(call) if with_input else {})
    content: ToolSearchResult | ToolSearchError
    if event.error is not None:
        content = ToolSearchError(event.error, event.detail)
    else:
        content = ToolSearchResult([ToolReference(name) for name in event.found])
    return use, ToolSearchToolResultBlock(block_id, content)


def _ordered_content(result: Completion) -> list[ContentBlock]:
    """An answer with searches the server ran: its blocks in the order they came (a search sits
    between the text before it and the text after it)."""
    content: list[ContentBlock] = []
    for event in result.events:
        last = content[-1] if content else None
        if isinstance(event, ReasoningDelta) and event.text:
            if isinstance(last, ThinkingBlock):
                last.thinking += event.text
            else:
                content.append(ThinkingBlock(event.text))
        elif isinstance(event, TextDelta) and event.text:
            if isinstance(last, TextBlock):
                last.text += event.text
            else:
                content.append(TextBlock(event.text))
        elif isinstance(event, ToolCall):
            content.append(_tool_use_block(event))
        elif isinstance(event, ToolSearched):
            content.extend(_search_blocks(event))
    return content


def message_object(
    result: Completion,
    model: str,
    *,
    message_id: str | None = None,
    window_room: int | None = None,
    compaction: tuple[str, Usage] | None = None,
    context: ContextManagement | UnsetType = UNSET,
) -> Message:
    """The answer object; ``compaction``: the note and the cost of a server-side compaction before it."""
    content: list[ContentBlock] = [CompactionBlock(compaction[0])] if compaction else []
    if any(isinstance(e, ToolSearched) for e in result.events):
        content.extend(_ordered_content(result))
        if not result.tool_calls and not result.text:
            content.append(TextBlock(""))  # as a stream ends: the answer always has a text block
    else:
        if result.reasoning:
            content.append(ThinkingBlock(result.reasoning))
        if result.text or not result.tool_calls:
            content.append(TextBlock(result.text))
        content.extend(_tool_use_block(c) for c in result.tool_calls)
    reason, sequence = stop_reason(result.finished, bool(result.tool_calls), window_room)
    return Message(
        id=message_id or new_id("msg_"),
        model=model,
        content=content,
        stop_reason=reason,
        stop_sequence=sequence,
        usage=usage_object(result.finished.usage, compaction[1] if compaction else None),
        context_management=context,
    )


def paused_object(
    note: str,
    spent: Usage,
    model: str,
    *,
    message_id: str | None = None,
    context: ContextManagement | UnsetType = UNSET,
) -> Message:
    """A compaction paused after its block (``pause_after_compaction``): ``stop_reason: "compaction"``."""
    return Message(
        id=message_id or new_id("msg_"),
        model=model,
        content=[CompactionBlock(note)],
        stop_reason="compaction",
        stop_sequence=None,
        usage=usage_object(Usage(), spent, answered=False),
        context_management=context,
    )


# -- responses: the event stream ---------------------------------------------------------------------


class _Blocks:
    """Opens and closes content blocks in order; ``index`` counts them from 0."""

    def __init__(self) -> None:
        self.index = -1
        self.open: type[ContentBlock] | None = None
        self.kinds: list[type[ContentBlock]] = []

    def start(self, block: ContentBlock) -> list[SSE]:
        out = self.stop()
        self.index += 1
        self.open = type(block)
        self.kinds.append(type(block))
        out.append(SSE(ContentBlockStart(self.index, block), event="content_block_start"))
        return out

    def delta(self, delta: BlockDelta) -> SSE:
        return SSE(ContentBlockDelta(self.index, delta), event="content_block_delta")

    def stop(self) -> list[SSE]:
        if self.open is None:
            return []
        out = [self.delta(SignatureDelta(""))] if self.open is ThinkingBlock else []
        out.append(SSE(ContentBlockStop(self.index), event="content_block_stop"))
        self.open = None
        return out


def _event_items(event: Event, blocks: _Blocks) -> list[SSE]:
    if isinstance(event, ReasoningDelta) and event.text:
        out = [] if blocks.open is ThinkingBlock else blocks.start(ThinkingBlock())
        return [*out, blocks.delta(ThinkingDelta(event.text))]
    if isinstance(event, TextDelta) and event.text:
        out = [] if blocks.open is TextBlock else blocks.start(TextBlock())
        return [*out, blocks.delta(TextDeltaWire(event.text))]
    if isinstance(event, ToolCall):
        out = blocks.start(_tool_use_block(event, with_input=False))
        out.append(blocks.delta(InputJsonDelta(event.arguments or "{}")))
        return [*out, *blocks.stop()]
    if isinstance(event, ToolSearched):
        use, result = _search_blocks(event, with_input=False)
        out = blocks.start(use)
        out.append(blocks.delta(InputJsonDelta(event.call.arguments or "{}")))
        return [*out, *blocks.start(result), *blocks.stop()]
    return []


class MessagesStream:
    """message_start → content blocks → message_delta → message_stop; a failure → ``event: error``.

    After a server-side compaction (``compacted``) the stream's first block is the ``compaction``
    block — its note whole in one ``compaction_delta`` — and the usage carries its ``iterations``."""

    def __init__(
        self,
        model: str,
        *,
        request_id: str,
        message_id: str | None = None,
        window_room: int | None = None,
        context: ContextManagement | UnsetType = UNSET,
    ) -> None:
        self.model = model
        self.window_room = window_room  # see ``stop_reason``
        self.request_id = request_id
        self.message_id = message_id or new_id("msg_")
        self.context = context  # what the request's context_management edits did, when it had any
        self.blocks = _Blocks()
        self.compaction: tuple[str, Usage] | None = None

    def start(self) -> list[SSE]:
        start = Message(
            id=self.message_id,
            model=self.model,
            content=[],
            stop_reason=None,
            stop_sequence=None,
            usage=usage_object(Usage()),
        )
        return [SSE(MessageStart(start), event="message_start")]

    def compacted(self, note: str, spent: Usage) -> list[SSE]:
        """The compaction block, whole: start (no content yet), one ``compaction_delta``, stop."""
        self.compaction = (note, spent)
        out = self.blocks.start(CompactionBlock())
        out.append(self.blocks.delta(CompactionDelta(note)))
        return out + self.blocks.stop()

    def paused(self) -> list[SSE]:
        """The end of a stream paused after its compaction block."""
        assert self.compaction is not None
        usage = usage_object(Usage(), self.compaction[1], answered=False)
        delta = MessageDelta(StopDelta("compaction", None), usage, self.context)
        return [SSE(delta, event="message_delta"), SSE(MessageStop(), event="message_stop")]

    def feed(self, event: Event) -> list[SSE]:
        blocks = self.blocks
        out = _event_items(event, blocks)
        if not isinstance(event, Finished):
            return out
        has_calls = ToolUseBlock in blocks.kinds
        out += blocks.stop()
        if not has_calls and TextBlock not in blocks.kinds:  # the object always has a text block then
            out += blocks.start(TextBlock()) + blocks.stop()
        delta = StopDelta(*stop_reason(event, has_calls, self.window_room))
        usage = usage_object(event.usage, self.compaction[1] if self.compaction else None)
        out.append(SSE(MessageDelta(delta, usage, self.context), event="message_delta"))
        out.append(SSE(MessageStop(), event="message_stop"))
        return out

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return [SSE(anthropic_error(exc, self.request_id)[1], event="error")]

    def end(self) -> list[SSE]:
        return []

    def keepalive(self) -> SSE:
        return SSE(Ping(), event="ping")

    def object(self, result: Completion) -> Message:
        return message_object(
            result,
            self.model,
            message_id=self.message_id,
            window_room=self.window_room,
            compaction=self.compaction,
            context=self.context,
        )
