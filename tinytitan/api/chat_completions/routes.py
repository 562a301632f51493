"""The Chat Completions controller: decode, map, run on the engine, encode. Nothing else."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post
from litestar.response import Response

from tinytitan.api.deps import EngineDep
from tinytitan.api.request_io import read_json, until_disconnect
from tinytitan.api.sse import sse_response

from .protocol import ChatCompletionRequest
from .translate import completion_object, stream_chunks, to_chat_request

__all__ = ["ChatCompletionsController"]


class ChatCompletionsController(Controller):
    path = "/v1/chat/completions"

    @post("/", status_code=200)
    async def create(self, request: Request[Any, Any, Any], engine: EngineDep) -> Any:
        wire = await read_json(request, ChatCompletionRequest)
        chat = to_chat_request(wire, workspace=request.headers.get("x-tinytitan-workspace"))
        job = await engine.prepare(chat)
        model = job.request.model_id
        with job.closed_on_error():
            if chat.stream:
                events = stream_chunks(job.events(), model, include_usage=bool(chat.include_usage))
                return sse_response(events, request, on_close=job.close)
            result = await until_disconnect(request, job.collect())
        return Response(completion_object(result, model))
