"""The Messages controller: decode, map, apply the context edits, run on the engine (compacting
first when the request's ``compact_20260112`` edit is due), encode. Nothing else."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.response import ServerSentEvent

from tinytitan.api.deps import EngineDep
from tinytitan.api.errors import request_id_of
from tinytitan.api.request_io import loop_guarded, read_json
from tinytitan.api.streaming import answer
from tinytitan.engine.passes.server_side import is_due
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.service import Engine

from .compacting import answer_compacting, apply_edits
from .context import Edits, clear_thinking, read_edits
from .encode import MessagesStream
from .mapping import to_chat_request
from .protocol import MessagesRequest
from .wire import Message, TokenCount, TokenCountContext

__all__ = ["MessagesController"]


async def _chat_request(
    request: Request[Any, Any, Any], engine: Engine, *, count_only: bool
) -> tuple[ChatRequest, Edits]:
    wire = await read_json(request, MessagesRequest)
    chat = to_chat_request(
        wire,
        context_window=engine.context_window(wire.model),
        count_only=count_only,
        request_id=request_id_of(request.scope),
        workspace=request.headers.get("x-tinytitan-workspace"),
    )
    return loop_guarded(chat, request.headers), read_edits(wire.context_management, chat.model)


class MessagesController(Controller):
    path = "/v1/messages"

    @post("/", status_code=200)
    async def create(self, request: Request[Any, Any, Any], engine: EngineDep) -> Response[Message] | ServerSentEvent:
        chat, edits = await _chat_request(request, engine, count_only=False)
        chat, context = await apply_edits(engine, chat, edits)
        if edits.compact is not None and await is_due(engine, chat, edits.compact.trigger):
            served = engine.route(chat.model)[0]
            encoder = MessagesStream(served, request_id=chat.request_id, context=context)
            return await answer_compacting(request, engine, chat, edits.compact, encoder)
        job = await engine.prepare(chat)
        room = job.generation.max_new  # the window's room for the answer, when under max_tokens
        window_room = room if room < job.request.cap else None
        encoder = MessagesStream(
            job.request.model_id, request_id=chat.request_id, window_room=window_room, context=context
        )
        return await answer(request, job, encoder, stream=chat.stream)

    @post("/count_tokens", status_code=200)
    async def count_tokens(self, request: Request[Any, Any, Any], engine: EngineDep) -> TokenCount:
        """The prompt's tokens once the edits are applied (compaction blocks sent back replace what came
        before them; ``clear_thinking`` drops old thoughts); a count never triggers a compaction."""
        chat, edits = await _chat_request(request, engine, count_only=True)
        cleared, turns = clear_thinking(chat, edits.keep_thinking)
        tokens = await engine.count_tokens(cleared)
        if not edits.sent:
            return TokenCount(tokens)
        original = await engine.count_tokens(chat) if turns else tokens
        return TokenCount(tokens, TokenCountContext(original))
