"""The Messages controller: decode, map, run on the engine, encode. Nothing else."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.response import ServerSentEvent

from tinytitan.api.deps import EngineDep
from tinytitan.api.errors import request_id_of
from tinytitan.api.request_io import read_json
from tinytitan.api.streaming import answer
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.service import Engine

from .encode import MessagesStream
from .mapping import to_chat_request
from .protocol import MessagesRequest
from .wire import Message, TokenCount

__all__ = ["MessagesController"]


async def _chat_request(request: Request[Any, Any, Any], engine: Engine, *, count_only: bool) -> ChatRequest:
    wire = await read_json(request, MessagesRequest)
    return to_chat_request(
        wire,
        context_window=engine.context_window(wire.model),
        count_only=count_only,
        request_id=request_id_of(request.scope),
        workspace=request.headers.get("x-tinytitan-workspace"),
    )


class MessagesController(Controller):
    path = "/v1/messages"

    @post("/", status_code=200)
    async def create(self, request: Request[Any, Any, Any], engine: EngineDep) -> Response[Message] | ServerSentEvent:
        chat = await _chat_request(request, engine, count_only=False)
        job = await engine.prepare(chat)
        room = job.generation.max_new  # the window's room for the answer, when under max_tokens
        window_room = room if room < job.request.cap else None
        encoder = MessagesStream(job.request.model_id, request_id=chat.request_id, window_room=window_room)
        return await answer(request, job, encoder, stream=chat.stream)

    @post("/count_tokens", status_code=200)
    async def count_tokens(self, request: Request[Any, Any, Any], engine: EngineDep) -> TokenCount:
        chat = await _chat_request(request, engine, count_only=True)
        return TokenCount(await engine.count_tokens(chat))
