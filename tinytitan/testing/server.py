"""A real uvicorn server on an ephemeral loopback port, in a background thread (for tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from tinytitan.api.background import BackgroundServer
from tinytitan.api.responses.websocket import Sessions
from tinytitan.engine.build import build_engine
from tinytitan.engine.models.base import Backend
from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = ["LiveServer", "live_server", "slot_held"]


@dataclass
class LiveServer:
    url: str  # http://127.0.0.1:PORT
    port: int
    engine: Engine
    loop: asyncio.AbstractEventLoop | None = None  # the server's event loop (its own thread)
    sessions: Sessions | None = None  # its open Responses WebSocket connections

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def task_count(self) -> int:
        """Tasks alive on the server's loop (a leak check: compare before and after)."""
        assert self.loop is not None

        async def count() -> int:
            return len(asyncio.all_tasks())

        return asyncio.run_coroutine_threadsafe(count(), self.loop).result(timeout=10) - 1  # not this one

    def prompt_tokens(self, request: ChatRequest) -> list[int]:
        """The prompt ``request`` becomes as the model sees it (an image's tokens included), rendered
        by the server's own engine on its loop."""
        assert self.loop is not None
        _validated, prompt = asyncio.run_coroutine_threadsafe(self.engine.validate(request), self.loop).result(60)
        return list(prompt.tokens)

    @property
    def recorded(self) -> list[dict[str, Any]]:
        return list(getattr(self.engine.backend, "recorded", []))


@contextmanager
def live_server(
    backend: Backend | ModelManager,
    *,
    settings: Settings | None = None,
    queue_limit: int = 4,
    default_reasoning: str | None = None,
) -> Iterator[LiveServer]:
    settings = settings or Settings(queue_limit=queue_limit)
    if default_reasoning is not None:
        settings = replace(settings, reasoning=default_reasoning)
    engine = build_engine(settings, backend)
    server = BackgroundServer(engine, settings).start()
    try:
        yield LiveServer(server.url, server.port, engine, server.loop, server.sessions)
    finally:
        server.stop()


@contextmanager
def slot_held(server: LiveServer) -> Iterator[Callable[[], None]]:
    """Hold the engine's slot (a one-slot server) with a ticket of the test's own, so a request waits
    in the queue for as long as the test needs — no race with a real generation. Yields ``release``
    (safe to call more than once); the slot is released on the way out in any case."""
    loop = server.loop
    assert loop is not None

    async def hold() -> Any:
        ticket = server.engine.queue.admit()
        await ticket.wait()
        return ticket

    ticket = asyncio.run_coroutine_threadsafe(hold(), loop).result(timeout=10)

    def release() -> None:
        loop.call_soon_threadsafe(ticket.release)

    try:
        yield release
    finally:
        release()
