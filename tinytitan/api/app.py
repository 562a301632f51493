"""``create_app``: one Litestar app over one Engine; the app's lifespan owns the engine."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.types import ASGIApp

from tinytitan.api.anthropic.routes import MessagesController
from tinytitan.api.chat_completions.routes import ChatCompletionsController
from tinytitan.api.deps import EngineDep
from tinytitan.api.encoding import decoded_bodies
from tinytitan.api.errors import exception_handler
from tinytitan.api.guard import GuardConfig, guarded
from tinytitan.api.openapi import openapi_route
from tinytitan.api.responses.routes import ResponsesController
from tinytitan.api.responses.store import ResponseStore
from tinytitan.api.responses.websocket import Sessions, responses_socket
from tinytitan.api.shared import (
    ModelsController,
    health,
    health_head,
    ready,
    ready_head,
    root,
    root_head,
    stub_requests,
)
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = ["create_app"]


def create_app(engine: EngineDep, settings: Settings | None = None, sessions: Sessions | None = None) -> ASGIApp:
    """The ASGI app: the transport guard wrapped around the Litestar app. ``sessions``: where its
    WebSocket connections are kept, for a server that shuts down (``tinytitan.api.server``)."""
    settings = settings or Settings()
    sessions = sessions or Sessions()

    @asynccontextmanager
    async def lifespan(_app: Litestar) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_default_executor(engine.cpu)  # no thread per request, ever
        engine.warm_up()  # load the weights in the background: the first request need not wait for all of it
        try:
            yield
        finally:
            if engine.readiness.state == "loading":
                # stopped while the weights load: a load cannot be interrupted and closing its backend
                # would wait for all of it, so the process may leave now (the caller joins the engine)
                threading.Thread(target=engine.shutdown, name="tinytitan-shutdown", daemon=True).start()
            else:
                engine.shutdown()

    def provide_engine() -> Engine:
        return engine

    responses_store = ResponseStore()

    def provide_responses_store() -> ResponseStore:
        return responses_store

    handlers: list[Any] = [
        root,
        root_head,
        health,
        health_head,
        ready,
        ready_head,
        ModelsController,
        ChatCompletionsController,
        ResponsesController,
        responses_socket,
        MessagesController,
        openapi_route(),
    ]
    if hasattr(engine.backend, "recorded"):
        handlers.append(stub_requests)
    guard = GuardConfig(
        host=settings.host, api_key=settings.api_key, cors_origins=settings.cors_origins, websockets=settings.websockets
    )
    app = Litestar(
        route_handlers=handlers,
        dependencies={
            "engine": Provide(provide_engine, sync_to_thread=False),
            "responses_store": Provide(provide_responses_store, sync_to_thread=False),
        },
        exception_handlers={Exception: exception_handler},
        lifespan=[lifespan],
        request_max_body_size=settings.body_limit,
        openapi_config=None,
        logging_config=None,
        state=State(
            {
                "keepalive_seconds": settings.keepalive_seconds,
                "websocket_max_age": settings.websocket_max_age,
                "websocket_sessions": sessions,
            }
        ),
        debug=False,
    )
    return guarded(decoded_bodies(app, settings.body_limit), guard)
