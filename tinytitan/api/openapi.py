"""The OpenAPI document (``GET /openapi.json``), built from the msgspec wire types: requests, answers
(a 200's ``application/json``) and stream events (its ``text/event-stream``: a oneOf of the events).

Handlers read raw bodies and decode them themselves (so a malformed body is OUR 400
``invalid_json``, never a framework error); this module documents the same wire types they decode
with, so the schema is honest by construction. It is what the fuzzing test (tests/api/test_fuzz.py)
and ``benchmarks/fuzz.py`` generate requests from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from litestar import get
from litestar.handlers import HTTPRouteHandler

from tinytitan.api.anthropic import wire as anthropic_wire
from tinytitan.api.anthropic.protocol import MessagesRequest
from tinytitan.api.anthropic.wire import Message, TokenCount
from tinytitan.api.chat_completions import wire as chat_wire
from tinytitan.api.chat_completions.protocol import ChatCompletionRequest
from tinytitan.api.chat_completions.wire import ChatCompletion
from tinytitan.api.responses import wire_events as responses_events
from tinytitan.api.responses.items import InputItemList
from tinytitan.api.responses.protocol import CompactRequest, ResponsesRequest
from tinytitan.api.responses.wire import Compaction, Deleted, InputTokens, Response
from tinytitan.api.wire import (
    AnthropicError,
    AnthropicModel,
    AnthropicModelList,
    OpenAIError,
    OpenAIModel,
    OpenAIModelList,
)

__all__ = ["BODY_ROUTES", "BodyRoute", "openapi_document", "openapi_route"]

_REF = "#/components/schemas/{name}"


@dataclass(frozen=True, slots=True)
class BodyRoute:
    """A POST route whose JSON body decodes as ``wire_type``, answered with ``answer`` (a struct) or,
    when it streams, with SSE frames each one of ``events``."""

    path: str
    wire_type: type[Any]
    summary: str
    answer: type[Any]
    events: tuple[type[Any], ...] = ()
    anthropic: bool = False


BODY_ROUTES: list[BodyRoute] = [
    BodyRoute(
        "/v1/chat/completions",
        ChatCompletionRequest,
        "Create a chat completion (JSON or SSE)",
        ChatCompletion,
        chat_wire.STREAM_EVENTS,
    ),
    BodyRoute(
        "/v1/responses", ResponsesRequest, "Create a response (JSON or SSE)", Response, responses_events.STREAM_EVENTS
    ),
    BodyRoute("/v1/responses/compact", CompactRequest, "Compact a conversation", Compaction),
    BodyRoute("/v1/responses/input_tokens", ResponsesRequest, "Count a response's input tokens", InputTokens),
    BodyRoute(
        "/v1/messages",
        MessagesRequest,
        "Create a message (JSON or SSE)",
        Message,
        anthropic_wire.STREAM_EVENTS,
        anthropic=True,
    ),
    BodyRoute(
        "/v1/messages/count_tokens", MessagesRequest, "Count a request's input tokens", TokenCount, anthropic=True
    ),
]

# answers of the routes without a body, by the name their schema is referred to with
_PLAIN_ANSWERS: list[type[Any]] = [
    OpenAIModelList,
    AnthropicModelList,
    OpenAIModel,
    AnthropicModel,
    Deleted,
    InputItemList,
    OpenAIError,
    AnthropicError,
]
_DONE = {"const": "[DONE]", "description": "The last data line of a Chat Completions stream"}
_INPUT_ITEMS_QUERY: list[dict[str, Any]] = [
    {"name": "order", "in": "query", "required": False, "schema": {"enum": ["asc", "desc"], "default": "desc"}},
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
    },
    {
        "name": "after",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "An item id: the page starts after it.",
    },
]


def _ref(kind: type[Any]) -> dict[str, str]:
    return {"$ref": _REF.format(name=kind.__name__)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _responses(anthropic: bool, ok: dict[str, Any] | None = None) -> dict[str, Any]:
    error = _ref(AnthropicError if anthropic else OpenAIError)
    return {
        "200": {"description": "OK", "content": ok or _json({"type": "object"})},
        "4XX": {"description": "A refusal, in the protocol's error envelope", "content": _json(error)},
    }


def _answers(route: BodyRoute) -> dict[str, Any]:
    """The 200 content: the answer object, and — for a route that streams — ``text/event-stream``
    whose every ``data:`` line is one of the event structs (``event:`` names its ``type``)."""
    ok = _json(_ref(route.answer))
    if route.events:
        frames: list[dict[str, Any]] = [_ref(e) for e in route.events]
        if not route.anthropic and OpenAIError in route.events:
            frames.append(_DONE)
        ok["text/event-stream"] = {"schema": {"oneOf": frames}}
    return _responses(route.anthropic, ok)


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _plain(summary: str, *, params: tuple[str, ...] = (), answers: tuple[type[Any], ...] = ()) -> dict[str, Any]:
    """A route without a body; ``answers``: the structs its 200 is one of (any object when none)."""
    ok = None
    if answers:
        ok = _json(_ref(answers[0]) if len(answers) == 1 else {"oneOf": [_ref(a) for a in answers]})
    op: dict[str, Any] = {"summary": summary, "responses": _responses(False, ok)}
    if params:
        op["parameters"] = [_path_param(p) for p in params]
    return op


def openapi_document(routes: list[BodyRoute] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route."""
    routes = BODY_ROUTES if routes is None else routes
    answers = [t for r in routes for t in (r.answer, *r.events)]
    types = [*(r.wire_type for r in routes), *answers, *_PLAIN_ANSWERS, Response]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for route, ref in zip(routes, refs, strict=False):
        paths.setdefault(route.path, {})["post"] = {
            "summary": route.summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref}}},
            "responses": _answers(route),
        }
    line = "One plain-text line saying the server runs (for a browser; clients check the address with HEAD)"
    paths["/"] = {"get": _plain(line), "head": _plain(line)}
    paths["/health"] = {"get": _plain("Liveness"), "head": _plain("Liveness")}
    paths["/ready"] = {"get": _plain("Readiness (503 until the model is loaded)"), "head": _plain("Readiness")}
    listing = _plain(
        "List models, each with context_window and max_output_tokens", answers=(OpenAIModelList, AnthropicModelList)
    )
    listing["parameters"] = [
        {
            "name": "details",
            "in": "query",
            "required": False,
            "schema": {"type": "boolean"},
            "description": "Add each model's facts under `tinytitan` (architecture, parameters, context window, …).",
        }
    ]
    paths["/v1/models"] = {"get": listing}
    paths["/v1/models/{model_id}"] = {
        "get": _plain("One model", params=("model_id",), answers=(OpenAIModel, AnthropicModel))
    }
    paths["/v1/models/unload"] = {"post": _plain("Release the resident model")}
    one = ("response_id",)
    paths["/v1/responses/{response_id}"] = {
        "get": _plain("Retrieve a stored response", params=one, answers=(Response,)),
        "delete": _plain("Delete a stored response", params=one, answers=(Deleted,)),
    }
    paths["/v1/responses/{response_id}/cancel"] = {"post": _plain("Cancel a background response", params=one)}
    items = _plain("A stored response's input items, a page at a time", params=one, answers=(InputItemList,))
    items["parameters"] += _INPUT_ITEMS_QUERY
    paths["/v1/responses/{response_id}/input_items"] = {"get": items}
    return {
        "openapi": "3.1.0",
        "info": {"title": "TinyTitan", "version": "1"},
        "paths": paths,
        "components": {"schemas": components},
    }


def openapi_route(routes: list[BodyRoute] | None = None) -> HTTPRouteHandler:
    """``GET /openapi.json``: the document, built once."""
    document = openapi_document(routes)

    @get("/openapi.json", sync_to_thread=False, include_in_schema=False)
    def openapi_json() -> dict[str, Any]:
        return document

    return openapi_json
