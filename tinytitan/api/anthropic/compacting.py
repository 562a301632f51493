"""Server-side compaction on ``POST /v1/messages`` (``compact_20260112``), and what the edits report.

Once the prompt reaches the edit's trigger (or no longer fits the window), the conversation is
compacted — as a continuation of it, so the prompt cache serves it — and the answer's first block
is ``{"type": "compaction", "content": <the note>}``. With ``pause_after_compaction`` the answer
ends there (``stop_reason: "compaction"``); otherwise the model answers from the compacted window —
the system text, then the note as the user turn — in the same message. Streaming: the compaction
block's ``content_block_start`` (content null), ONE ``compaction_delta`` with the whole note, its
``content_block_stop``; ``ping`` events while the passes run. ``usage.iterations`` lists the
compaction's cost and the answer's; the top-level fields count the answer alone, as the API's do.
Sent back in a later request, the block replaces everything before it (``mapping._compaction_cut``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

from litestar import Request, Response
from litestar.response import ServerSentEvent

from tinytitan.api.request_io import until_disconnect
from tinytitan.api.sse import SSE, sse_response
from tinytitan.api.streaming import Continued, encode_stream
from tinytitan.api.wire import UNSET, UnsetType
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.job import Job
from tinytitan.engine.passes.compaction import CompactionResult, compact
from tinytitan.engine.passes.server_side import continue_after
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.service import Engine

from .context import CompactEdit, Edits, clear_thinking
from .encode import MessagesStream, paused_object
from .wire import AppliedEdit, ContextManagement, Message

__all__ = ["answer_compacting", "apply_edits"]

log = logging.getLogger("tinytitan.api")


async def apply_edits(
    engine: Engine, chat: ChatRequest, edits: Edits
) -> tuple[ChatRequest, ContextManagement | UnsetType]:
    """``chat`` with the edits that change the prompt applied, and what to report (when any were sent)."""
    if not edits.sent:
        return chat, UNSET
    cleared, turns = clear_thinking(chat, edits.keep_thinking)
    applied: list[AppliedEdit] = []
    if turns:
        tokens = await engine.prompt_tokens(chat) - await engine.prompt_tokens(cleared)
        applied.append(AppliedEdit(cleared_input_tokens=max(0, tokens), cleared_thinking_turns=turns))
    return cleared, ContextManagement(applied)


class _Compacting:
    def __init__(self, engine: Engine, chat: ChatRequest, edit: CompactEdit, encoder: MessagesStream) -> None:
        self.engine = engine
        self.chat = chat
        self.edit = edit
        self.encoder = encoder
        self.job: Job | None = None

    async def compact(self) -> CompactionResult:
        result = await compact(self.engine, self.chat, instruction=self.edit.instructions)
        if not self.edit.pause:
            self.job = await self.engine.prepare(continue_after(self.chat, result.note))
            room = self.job.generation.max_new  # the window's room for the answer, when under max_tokens
            self.encoder.window_room = room if room < self.job.request.cap else None
        return result

    async def stream(self) -> AsyncGenerator[SSE, None]:
        encoder = self.encoder
        for frame in encoder.start():
            yield frame
        try:
            result = await self.compact()
        except TinyTitanError as exc:
            for frame in encoder.fail(exc):
                yield frame
            return
        except Exception:
            log.exception("a compaction failed")
            for frame in encoder.fail(GenerationFailed()):
                yield frame
            return
        for frame in encoder.compacted(result.note, result.usage):
            yield frame
        if self.job is None:
            for frame in encoder.paused():
                yield frame
            return
        async for frame in encode_stream(self.job.events(), Continued(encoder)):
            yield frame

    def close(self) -> None:
        if self.job is not None:
            self.job.close()


async def answer_compacting(
    request: Request[Any, Any, Any],
    engine: Engine,
    chat: ChatRequest,
    edit: CompactEdit,
    encoder: MessagesStream,
) -> Response[Message] | ServerSentEvent:
    """Compact ``chat``, then answer from the compacted window (or pause): streamed or whole."""
    run = _Compacting(engine, chat, edit, encoder)
    if chat.stream:
        return sse_response(run.stream(), request, keepalive=encoder.keepalive, on_close=run.close)
    try:
        result = await until_disconnect(request, run.compact())
        if run.job is None:
            message = paused_object(
                result.note, result.usage, encoder.model, message_id=encoder.message_id, context=encoder.context
            )
            return Response(message)
        encoder.compaction = (result.note, result.usage)
        completion = await until_disconnect(request, run.job.collect())
    finally:
        run.close()
    return Response(encoder.object(completion))
