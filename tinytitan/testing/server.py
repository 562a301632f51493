"""A real uvicorn server on an ephemeral loopback port, in a background thread (for tests)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from tinytitan.api.app import create_app
from tinytitan.engine.backends.base import Backend
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = ["LiveServer", "live_server"]


@dataclass
class LiveServer:
    url: str  # http://127.0.0.1:PORT
    port: int
    engine: Engine

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    @property
    def recorded(self) -> list[dict[str, Any]]:
        return list(getattr(self.engine.backend, "recorded", []))


@contextmanager
def live_server(
    backend: Backend, *, settings: Settings | None = None, queue_limit: int = 4, default_reasoning: str | None = None
) -> Iterator[LiveServer]:
    settings = settings or Settings(queue_limit=queue_limit)
    engine = Engine(backend, queue_limit=settings.queue_limit, default_reasoning=default_reasoning)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(engine, settings), log_level="warning", lifespan="on", timeout_keep_alive=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the test server failed to start")
        threading.Event().wait(0.01)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", port, engine)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
