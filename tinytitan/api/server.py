"""The uvicorn server every TinyTitan process runs (``tinytitan serve`` and the in-process one).

On SIGTERM or Ctrl-C uvicorn stops accepting connections, waits ``SHUTDOWN_GRACE`` seconds for the
open ones and then cancels them: a stream is cut mid-body (clients read "incomplete chunked read")
and a request still waiting for a slot is answered with a bare 500. A generation can easily outlast
that (a long prefill; in a distributed group, a collective with a rank that died), so the engine is
told first (``Engine.stop``): waiting and new requests are refused at once with a 503 in their
protocol's envelope, running ones may finish for ``FINISH_WITHIN`` seconds and then end with the
same error as a well-formed stream ending — every connection closes before uvicorn gives up.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import uvicorn

from tinytitan.api.app import create_app
from tinytitan.api.transport import uvicorn_options
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = ["FINISH_WITHIN", "SHUTDOWN_GRACE", "Server", "serve"]

SHUTDOWN_GRACE = 5  # seconds uvicorn waits for open connections before it cancels them
FINISH_WITHIN = 3.0  # of which running generations may use this much to finish on their own


class Server(uvicorn.Server):
    """uvicorn's server over ``create_app(engine, settings)``; its shutdown stops the engine first."""

    def __init__(self, engine: Engine, settings: Settings, **config: Any) -> None:
        app = create_app(engine, settings)
        options = {"log_level": settings.log_level, **config}
        super().__init__(
            uvicorn.Config(
                app, lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE, **uvicorn_options(settings), **options
            )
        )
        self.engine = engine

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.engine.stop(finish_within=FINISH_WITHIN)
        await super().shutdown(sockets)


def serve(engine: Engine, settings: Settings) -> None:
    """Serve on ``settings.host:settings.port`` until SIGTERM or Ctrl-C; exit 3 if it never started."""
    server = Server(engine, settings, host=settings.host, port=settings.port)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn re-raises it once it has shut down
        server.run()
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE: the port is taken, the app failed to start
