"""Shared routes (reference §3): a line at ``/`` for a browser, health and readiness, the model list in
both shapes, one model, unload.

``/health`` is liveness: 200 while the process answers, its ``status`` ``ok`` once the model is in,
``loading`` (with the ``step`` under way) before, ``failed`` (with the ``error``) when it could not
load. ``/ready`` is readiness: the same body, 200 only when ready, else 503 — for a load balancer,
a service manager or a script that waits before sending work. Neither needs the API key.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, get, head, post
from litestar.params import FromPath

from tinytitan.api.codex_models import codex_model, modalities
from tinytitan.api.deps import EngineDep
from tinytitan.api.errors import is_anthropic
from tinytitan.api.wire import AnthropicModel, AnthropicModelList, OpenAIModel, OpenAIModelList
from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.limits import planning_cap
from tinytitan.engine.service import Engine

__all__ = [
    "ModelsController",
    "capabilities",
    "health",
    "health_head",
    "ready",
    "ready_head",
    "root",
    "root_head",
    "stub_requests",
]


def _openai_model(model_id: str, info: ModelInfo) -> OpenAIModel:
    window = info.context_window
    return OpenAIModel(
        model_id, context_window=window, max_output_tokens=planning_cap(window), input_modalities=modalities(info)
    )


def _anthropic_model(model_id: str, info: ModelInfo) -> AnthropicModel:
    window = info.context_window
    return AnthropicModel(
        model_id, model_id, max_input_tokens=window, max_tokens=planning_cap(window), capabilities=capabilities(info)
    )


def _supported(value: bool) -> dict[str, bool]:
    return {"supported": value}


def capabilities(info: ModelInfo) -> dict[str, Any]:
    """The Anthropic model object's ``capabilities``, every key the API defines, from what this server
    does for the model: images for a vision model, no PDFs, citations, batches or code execution; server
    tools where the model can call tools (the tool search tools run inside the request); structured
    outputs enforced by a grammar; thinking when its template has a switch
    (``enabled`` maps its budget onto the model's levels, ``adaptive`` leaves the server default);
    ``output_config.effort`` is accepted but not acted on, so effort is not offered; context
    management: server-side compaction (``compact_20260112``) and ``clear_thinking_20251015`` are
    applied, ``clear_tool_uses_20250919`` is refused."""
    thinks = any(level != "off" for level in info.reasoning_levels)
    no = _supported(False)
    return {
        "batch": no,
        "citations": no,
        "code_execution": no,
        "context_management": {
            "supported": True,
            "clear_thinking_20251015": _supported(True),
            "clear_tool_uses_20250919": no,
            "compact_20260112": _supported(True),
        },
        "effort": {"supported": False, "low": no, "medium": no, "high": no, "max": no},
        "image_input": _supported(info.vision),
        "pdf_input": no,
        "server_tools": _supported(info.tool_calls is not False),
        "structured_outputs": _supported(True),
        "thinking": {"supported": thinks, "types": {"adaptive": _supported(thinks), "enabled": _supported(thinks)}},
    }


def _ends(ids: list[str]) -> tuple[str | None, str | None]:
    return (ids[0], ids[-1]) if ids else (None, None)


_HEALTH = b'{"status":"ok"}'
_ROOT = (
    "TinyTitan is running. Point a client at this address: OpenAI SDKs and Codex at /v1, "
    "Anthropic SDKs and Claude Code at the root; GET /v1/models lists the models.\n"
)


@get("/", sync_to_thread=False)
def root() -> Response[str]:
    """One line for a person who opens the server's address in a browser."""
    return Response(_ROOT, media_type="text/plain")


def _state(engine: Engine, *, readiness: bool) -> Response[bytes]:
    body = msgspec.json.encode(engine.readiness.as_json())
    status = 503 if readiness and engine.readiness.state != "ready" else 200
    return Response(body, status_code=status, media_type="application/json")


def _head(answer: Response[Any], media_type: str = "application/json") -> Response[None]:
    """The headers GET would send — ``content-length`` included — and no body (RFC 9110 §9.3.2)."""
    content = answer.content.encode() if isinstance(answer.content, str) else answer.content
    length = str(len(content))
    return Response(None, status_code=answer.status_code, media_type=media_type, headers={"content-length": length})


@head("/", sync_to_thread=False)
def root_head() -> Response[None]:
    """What a client that checks the address first sends (Claude Code, on every start)."""
    return _head(Response(_ROOT, media_type="text/plain"), "text/plain")


@get("/health", sync_to_thread=False)
def health(engine: EngineDep) -> Response[bytes]:
    return _state(engine, readiness=False)


@head("/health", sync_to_thread=False)
def health_head(engine: EngineDep) -> Response[None]:
    return _head(_state(engine, readiness=False))


@get("/ready", sync_to_thread=False)
def ready(engine: EngineDep) -> Response[bytes]:
    return _state(engine, readiness=True)


@head("/ready", sync_to_thread=False)
def ready_head(engine: EngineDep) -> Response[None]:
    return _head(_state(engine, readiness=True))


class ModelsController(Controller):
    path = "/v1/models"

    @get("/")
    async def list_models(
        self, request: Request[Any, Any, Any], engine: EngineDep
    ) -> OpenAIModelList | AnthropicModelList:
        """Every served id (never a ``-fast`` alias), each with its context window and the output cap a
        client plans with (``planning_cap``: a request may still ask for up to the window). OpenAI's
        shape also carries ``models``, the same ids as Codex's model discovery decodes them
        (``codex_models.py``). ``?details=true`` adds each model's facts under ``tinytitan``
        (``tinytitan models --url``)."""
        ids = engine.model_ids()
        listing: OpenAIModelList | AnthropicModelList
        if is_anthropic(request.url.path, request.headers):
            listing = AnthropicModelList([_anthropic_model(i, engine.info_for(i)) for i in ids], *_ends(ids))
        else:
            listing = OpenAIModelList(
                [_openai_model(i, engine.info_for(i)) for i in ids],
                models=[codex_model(i, engine.info_for(i)) for i in ids],
            )
        if request.query_params.get("details", "").lower() in ("1", "true", "yes"):
            for obj in listing.data:
                obj.tinytitan = engine.models.details(obj.id)
        return listing

    @get("/{model_id:path}")
    async def get_model(
        self, request: Request[Any, Any, Any], engine: EngineDep, model_id: FromPath[str]
    ) -> OpenAIModel | AnthropicModel:
        """Any name the server would accept, echoed as asked; answered from facts, never loading a model."""
        name = model_id.lstrip("/")
        info = engine.info_for(name)  # UnknownModel (404) naming what is served
        anthropic = is_anthropic(request.url.path, request.headers)
        return _anthropic_model(name, info) if anthropic else _openai_model(name, info)

    @post("/unload", status_code=200)
    async def unload(self, engine: EngineDep) -> dict[str, Any]:
        return {"status": "ok", "unloaded": await engine.unload()}


@get("/_stub/requests")
async def stub_requests(engine: EngineDep) -> list[dict[str, Any]]:
    """The requests a scripted backend recorded (only mounted when serving ``--stub``)."""
    return list(getattr(engine.backend, "recorded", []))
