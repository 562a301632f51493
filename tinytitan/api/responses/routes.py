"""The Responses controller: decode, run a turn (``turn.start_turn``), store; count a body's input
tokens; compact. Nothing else."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Response, ServerSentEvent

from tinytitan.api.deps import EngineDep, StoreDep
from tinytitan.api.request_io import read_json, until_disconnect
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.passes.compaction import compact

from .encode import compaction_object
from .items import InputItem, InputItemList
from .mapping import to_chat_request
from .protocol import CompactRequest, ResponsesRequest
from .store import page
from .turn import start_turn
from .wire import Compaction, Deleted, InputTokens
from .wire import Response as ResponseObject

__all__ = ["ResponsesController"]


class ResponsesController(Controller):
    path = "/v1/responses"

    @post("/", status_code=200)
    async def create(
        self, request: Request[Any, Any, Any], engine: EngineDep, responses_store: StoreDep
    ) -> Response[ResponseObject] | ServerSentEvent:
        store = responses_store
        wire = await read_json(request, ResponsesRequest)
        history: list[InputItem] = []
        if wire.previous_response_id:
            history = store.stored(wire.previous_response_id, param="previous_response_id").conversation()
        turn = await start_turn(
            engine,
            wire,
            history=history,
            resolve=store.find_item,
            on_done=store.remember,
            workspace=request.headers.get("x-tinytitan-workspace"),
            loop_guard=request.headers,
        )
        return await turn.respond(request)

    @post("/input_tokens", status_code=200)
    async def input_tokens(
        self, request: Request[Any, Any, Any], engine: EngineDep, responses_store: StoreDep
    ) -> InputTokens:
        """The input tokens a create body would cost: the same mapping and refusals, the prompt as the
        chat template renders it, counted by the model's own tokenizer (no memory fragment)."""
        wire = await read_json(request, ResponsesRequest)
        history: list[InputItem] = []
        if wire.previous_response_id:
            history = responses_store.stored(wire.previous_response_id, param="previous_response_id").conversation()
        chat, _current = to_chat_request(wire, history=history, resolve=responses_store.find_item)
        return InputTokens(input_tokens=await engine.count_tokens(chat))

    @post("/compact", status_code=200)
    async def compact(
        self, request: Request[Any, Any, Any], engine: EngineDep, responses_store: StoreDep
    ) -> Compaction:
        wire = await read_json(request, CompactRequest)
        if not wire.model:
            raise InvalidRequest("model is required", param="model", code="invalid_value")
        engine.route(wire.model)  # an unknown name is refused before any work
        history: list[InputItem] = []
        if wire.previous_response_id:
            history = responses_store.stored(wire.previous_response_id, param="previous_response_id").conversation()
        session = ResponsesRequest(  # the conversation as the session's turns sent it
            model=wire.model,
            instructions=wire.instructions,
            input=[] if wire.input is None else wire.input,
            tools=wire.tools,
            tool_choice=wire.tool_choice,
            parallel_tool_calls=wire.parallel_tool_calls,
            reasoning=wire.reasoning,
            text=wire.text,
        )
        workspace = request.headers.get("x-tinytitan-workspace")
        resolve = responses_store.find_item
        chat, _current = to_chat_request(session, history=history, resolve=resolve, workspace=workspace)
        result = await until_disconnect(request, compact(engine, chat, max_tokens=wire.max_compaction_tokens))
        return compaction_object(result, wire.instructions)

    @get("/{response_id:str}")
    async def retrieve(self, response_id: FromPath[str], responses_store: StoreDep) -> ResponseObject:
        return responses_store.stored(response_id).response

    @delete("/{response_id:str}", status_code=200)
    async def remove(self, response_id: FromPath[str], responses_store: StoreDep) -> Deleted:
        responses_store.stored(response_id)
        responses_store.delete(response_id)
        return Deleted(response_id)

    @post("/{response_id:str}/cancel", status_code=200)
    async def cancel(self, response_id: FromPath[str], responses_store: StoreDep) -> dict[str, Any]:
        responses_store.stored(response_id)
        raise InvalidRequest("Only responses created with background=true can be cancelled.", param="response_id")

    @get("/{response_id:str}/input_items")
    async def input_items(
        self,
        response_id: FromPath[str],
        responses_store: StoreDep,
        order: FromQuery[str] = "desc",
        limit: FromQuery[int] = 20,
        after: FromQuery[str | None] = None,
    ) -> InputItemList:
        stored = responses_store.stored(response_id)
        return page(stored.input_items, order=order, limit=limit, after=after)
