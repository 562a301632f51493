"""The app on an ephemeral loopback port, served from a background thread of this process.

``tinytitan chat --model`` / ``--stub`` talks HTTP to this server exactly as it talks to a separate
``tinytitan serve``, so the chat has one code path; the tests' ``live_server`` is built on it too.
``stop()`` shuts uvicorn down (it ends the engine's open generations first, then the app's lifespan
shuts the engine down) and then waits for the engine's device thread: a process must not
finalize while that thread is inside native code (see ``Engine.join``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from tinytitan.api.listen import listen
from tinytitan.api.server import Server
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = ["BackgroundServer"]

log = logging.getLogger("tinytitan.background")


class BackgroundServer:
    """``start()`` → ``url`` answers; ``stop()`` → the server, the engine and its thread are down."""

    def __init__(self, engine: Engine, settings: Settings | None = None, *, log_level: str = "warning") -> None:
        self.engine = engine
        self.settings = settings or Settings(queue_limit=engine.queue.limit)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._sock = listen("127.0.0.1", 0)
        self.port: int = self._sock.getsockname()[1]
        self._server = Server(engine, self.settings, log_level=log_level)
        self.sessions = self._server.sessions  # its open WebSocket connections
        self._thread = threading.Thread(target=self._run, name="tinytitan-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self._server.serve(sockets=[self._sock])

        # the loop ``tinytitan serve`` runs (uvicorn's choice: uvloop where it is installed)
        factory = getattr(self._server.config, "get_loop_factory", lambda: None)()
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve())

    def start(self) -> BackgroundServer:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the in-process server failed to start")
            threading.Event().wait(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> bool:
        """Shut down; True when the device thread stopped within ``timeout`` seconds."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)
        self._sock.close()
        self.engine.shutdown()
        return self.engine.join(timeout=timeout)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
