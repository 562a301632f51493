"""The Chat Completions controller: decode, map, run on the engine, encode. Nothing else."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.response import ServerSentEvent

from tinytitan.api.deps import EngineDep
from tinytitan.api.request_io import loop_guarded, read_json
from tinytitan.api.streaming import answer

from .encode import ChatStream
from .mapping import to_chat_request
from .protocol import ChatCompletionRequest
from .wire import ChatCompletion

__all__ = ["ChatCompletionsController"]


class ChatCompletionsController(Controller):
    path = "/v1/chat/completions"

    @post("/", status_code=200)
    async def create(
        self, request: Request[Any, Any, Any], engine: EngineDep
    ) -> Response[ChatCompletion] | ServerSentEvent:
        wire = await read_json(request, ChatCompletionRequest)
        chat = loop_guarded(
            to_chat_request(wire, workspace=request.headers.get("x-tinytitan-workspace")), request.headers
        )
        job = await engine.prepare(chat)
        encoder = ChatStream(job.request.model_id, include_usage=bool(chat.include_usage))
        return await answer(request, job, encoder, stream=chat.stream)
