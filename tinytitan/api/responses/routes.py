"""The Responses controller: decode, map, run on the engine, encode, store. Nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar import Controller, Request, delete, get, post
from litestar.params import FromPath, FromQuery
from litestar.response import Response

from tinytitan.api.deps import EngineDep, StoreDep
from tinytitan.api.request_io import read_json, until_disconnect
from tinytitan.api.sse import SSE, sse_response
from tinytitan.engine.compaction import compact
from tinytitan.engine.errors import InvalidRequest, NotFound, UnknownModel

from .encode import OutputBuilder, collect_response, compaction_object, encode_stream, response_shell
from .inputs import MappedInput, map_input, to_chat_request
from .protocol import CompactRequest, ResponsesRequest
from .store import ResponseStore, StoredResponse

__all__ = ["ResponsesController"]

_STORED_STATUSES = ("completed", "incomplete")


def _stored(store: ResponseStore, response_id: str) -> StoredResponse:
    found = store.get(response_id)
    if found is None:
        raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
    return found


def _previous(store: ResponseStore, response_id: str) -> StoredResponse:
    found = store.get(response_id)
    if found is None:
        raise NotFound(f"Previous response with id '{response_id}' not found.", param="previous_response_id")
    return found


class ResponsesController(Controller):
    path = "/v1/responses"

    @post("/", status_code=200)
    async def create(self, request: Request[Any, Any, Any], engine: EngineDep, responses_store: StoreDep) -> Any:
        store = responses_store
        wire = await read_json(request, ResponsesRequest)
        history: list[dict[str, Any]] = []
        if wire.previous_response_id:
            history = _previous(store, wire.previous_response_id).conversation()
        chat, current = to_chat_request(
            wire,
            history=history,
            resolve=store.find_item,
            workspace=request.headers.get("x-tinytitan-workspace"),
        )
        job = await engine.prepare(chat)
        with job.closed_on_error():
            keep = wire.store is not False
            builder = OutputBuilder(
                response_shell(wire, model=job.request.model_id, sampling=job.request.sampling, store=keep)
            )

            def remember(response: dict[str, Any]) -> None:
                if keep and response["status"] in _STORED_STATUSES:
                    store.put(StoredResponse(response, current.items, [*history, *current.items]))

            if chat.stream:

                async def frames() -> AsyncIterator[SSE]:
                    async for event in encode_stream(job.events(), builder):
                        if event["type"] in ("response.completed", "response.incomplete"):
                            remember(builder.response)
                        yield SSE(event, event=event["type"])

                return sse_response(frames(), request, on_close=job.close)
            response = await until_disconnect(request, collect_response(job.events(), builder))
            remember(response)
        return Response(response)

    @post("/compact", status_code=200)
    async def compact(self, request: Request[Any, Any, Any], engine: EngineDep, responses_store: StoreDep) -> Any:
        wire = await read_json(request, CompactRequest)
        if not wire.model:
            raise InvalidRequest("model is required", param="model", code="invalid_value")
        if not engine.accepts(wire.model):
            raise UnknownModel(wire.model)
        mapped = MappedInput()
        if wire.previous_response_id:
            mapped = map_input(
                _previous(responses_store, wire.previous_response_id).conversation(),
                resolve=responses_store.find_item,
                param="previous_response_id",
            )
        if wire.input is not None:
            mapped.extend(map_input(wire.input, resolve=responses_store.find_item))
        work = compact(engine, wire.model, mapped.messages, notes=mapped.notes, max_tokens=wire.max_compaction_tokens)
        result = await until_disconnect(request, work)
        return Response(compaction_object(result, wire.instructions))

    @get("/{response_id:str}")
    async def retrieve(self, response_id: FromPath[str], responses_store: StoreDep) -> dict[str, Any]:
        return _stored(responses_store, response_id).response

    @delete("/{response_id:str}", status_code=200)
    async def remove(self, response_id: FromPath[str], responses_store: StoreDep) -> dict[str, Any]:
        _stored(responses_store, response_id)
        responses_store.delete(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    @post("/{response_id:str}/cancel", status_code=200)
    async def cancel(self, response_id: FromPath[str], responses_store: StoreDep) -> dict[str, Any]:
        _stored(responses_store, response_id)
        raise InvalidRequest("Only responses created with background=true can be cancelled.", param="response_id")

    @get("/{response_id:str}/input_items")
    async def input_items(
        self,
        response_id: FromPath[str],
        responses_store: StoreDep,
        order: FromQuery[str] = "desc",
        limit: FromQuery[int] = 20,
        after: FromQuery[str | None] = None,
    ) -> dict[str, Any]:
        stored = _stored(responses_store, response_id)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
        if not 1 <= limit <= 100:
            raise InvalidRequest(f"limit must be between 1 and 100, got {limit}", param="limit")
        items = list(stored.input_items if order == "asc" else reversed(stored.input_items))
        if after is not None:
            ids = [item.get("id") for item in items]
            if after not in ids:
                raise InvalidRequest(f"no input item with id '{after}' in this response", param="after")
            items = items[ids.index(after) + 1 :]
        page = items[:limit]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
