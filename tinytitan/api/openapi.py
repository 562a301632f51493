"""The OpenAPI document (``GET /openapi.json``), built from the msgspec wire types.

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

from tinytitan.api.anthropic.protocol import MessagesRequest
from tinytitan.api.chat_completions.protocol import ChatCompletionRequest
from tinytitan.api.responses.protocol import CompactRequest, ResponsesRequest

__all__ = ["BODY_ROUTES", "BodyRoute", "openapi_document", "openapi_route"]

_REF = "#/components/schemas/{name}"


@dataclass(frozen=True, slots=True)
class BodyRoute:
    """A POST route whose JSON body decodes as ``wire_type``."""

    path: str
    wire_type: type[Any]
    summary: str
    anthropic: bool = False


BODY_ROUTES: list[BodyRoute] = [
    BodyRoute("/v1/chat/completions", ChatCompletionRequest, "Create a chat completion (JSON or SSE)"),
    BodyRoute("/v1/responses", ResponsesRequest, "Create a response (JSON or SSE)"),
    BodyRoute("/v1/responses/compact", CompactRequest, "Compact a conversation"),
    BodyRoute("/v1/messages", MessagesRequest, "Create a message (JSON or SSE)", anthropic=True),
    BodyRoute("/v1/messages/count_tokens", MessagesRequest, "Count a request's input tokens", anthropic=True),
]

_OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": "string"},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
_ANTHROPIC_ERROR = {
    "type": "object",
    "required": ["type", "error", "request_id"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
        "request_id": {"type": "string"},
    },
}
_ANY_OBJECT = {"type": "object"}


def _responses(anthropic: bool, *, stream: bool = False) -> dict[str, Any]:
    ok: dict[str, Any] = {"application/json": {"schema": _ANY_OBJECT}}
    if stream:
        ok["text/event-stream"] = {"schema": {"type": "string"}}
    error = {"$ref": _REF.format(name="AnthropicError" if anthropic else "OpenAIError")}
    return {
        "200": {"description": "OK", "content": ok},
        "4XX": {
            "description": "A refusal, in the protocol's error envelope",
            "content": {"application/json": {"schema": error}},
        },
    }


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _plain(summary: str, *, params: tuple[str, ...] = (), anthropic: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": _responses(anthropic)}
    if params:
        op["parameters"] = [_path_param(p) for p in params]
    return op


def openapi_document(routes: list[BodyRoute] | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route."""
    routes = BODY_ROUTES if routes is None else routes
    refs, components = msgspec.json.schema_components([r.wire_type for r in routes], ref_template=_REF)
    components = {**components, "OpenAIError": _OPENAI_ERROR, "AnthropicError": _ANTHROPIC_ERROR}
    paths: dict[str, dict[str, Any]] = {}
    for route, ref in zip(routes, refs, strict=True):
        paths.setdefault(route.path, {})["post"] = {
            "summary": route.summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref}}},
            "responses": _responses(route.anthropic, stream=True),
        }
    paths["/"] = {"get": _plain("One plain-text line saying the server runs (for a browser)")}
    paths["/health"] = {"get": _plain("Liveness"), "head": _plain("Liveness")}
    paths["/ready"] = {"get": _plain("Readiness (503 until the model is loaded)"), "head": _plain("Readiness")}
    listing = _plain("List models, each with context_window and max_output_tokens")
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
    paths["/v1/models/{model_id}"] = {"get": _plain("One model", params=("model_id",))}
    paths["/v1/models/unload"] = {"post": _plain("Release the resident model")}
    one = ("response_id",)
    paths["/v1/responses/{response_id}"] = {
        "get": _plain("Retrieve a stored response", params=one),
        "delete": _plain("Delete a stored response", params=one),
    }
    paths["/v1/responses/{response_id}/cancel"] = {"post": _plain("Cancel a background response", params=one)}
    paths["/v1/responses/{response_id}/input_items"] = {"get": _plain("A stored response's input items", params=one)}
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
