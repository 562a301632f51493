"""The uvicorn server every TinyTitan process runs (``tinytitan serve`` and the in-process one).

On SIGTERM or Ctrl-C uvicorn stops accepting connections, waits ``SHUTDOWN_GRACE`` seconds for the
open ones and then cancels them: a stream is cut mid-body (clients read "incomplete chunked read")
and a request still waiting for a slot is answered with a bare 500. A generation can easily outlast
that (a long prefill; in a distributed group, a collective with a rank that died), so the engine is
told first (``Engine.stop``): waiting and new requests are refused at once with a 503 in their
protocol's envelope, running ones may finish for ``FINISH_WITHIN`` seconds and then end with the
same error as a well-formed stream ending — every connection closes before uvicorn gives up.

``tinytitan serve`` runs it on the socket it bound before loading anything (``tinytitan.api.listen``).
A second Ctrl-C while it shuts down stops the process at once with one line and status 130: no
waiting, no tracebacks from the connections it cuts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from types import FrameType
from typing import Any

import uvicorn

from tinytitan.api.app import create_app
from tinytitan.api.responses.websocket import Sessions
from tinytitan.api.transport import uvicorn_options
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings

__all__ = [
    "FINISH_WITHIN",
    "FORCED_STOP",
    "SHUTDOWN_GRACE",
    "Server",
    "quiet_uvicorn",
    "serve",
]

SHUTDOWN_GRACE = 5  # seconds uvicorn waits for open connections before it cancels them
FINISH_WITHIN = 3.0  # of which running generations may use this much to finish on their own
FORCED_STOP = 130  # the exit status of a second Ctrl-C (128 + SIGINT, as a shell reports it)


_PROBES = ("/health", "/ready")


class _NoProbes(logging.Filter):
    """Drops the access-log line of a ``/health`` or ``/ready`` poll (a monitor would flood the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        path = args[2] if isinstance(args, tuple) and len(args) > 2 else ""
        return not (isinstance(path, str) and path.split("?", 1)[0] in _PROBES)


_NO_PROBES = _NoProbes()


class _OneLine(logging.Filter):
    """uvicorn logs a WebSocket text frame that is not UTF-8 with a traceback (it then closes the
    connection with 1007, as it should): a client's mistake is one warning line, not a server error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Invalid UTF-8 sequence received from client"):
            record.msg = "a WebSocket client sent a text frame that is not UTF-8; closed it with 1007"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_ONE_LINE = _OneLine()


class Server(uvicorn.Server):
    """uvicorn's server over ``create_app(engine, settings)``; its shutdown stops the engine first."""

    def __init__(self, engine: Engine, settings: Settings, **config: Any) -> None:
        self.sessions = Sessions()
        app = create_app(engine, settings, self.sessions)
        options = {"log_level": settings.log_level, **config}
        super().__init__(
            uvicorn.Config(
                app, lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE, **uvicorn_options(settings), **options
            )
        )
        self.engine = engine
        logging.getLogger("uvicorn.access").addFilter(_NO_PROBES)  # once: filters are a set-like list
        logging.getLogger("uvicorn.error").addFilter(_ONE_LINE)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """The engine first (see the module), then the WebSocket connections end their turns
        well-formed and close (1001), then uvicorn closes what is left."""
        self.engine.stop(finish_within=FINISH_WITHIN)
        await self.sessions.shut_down(timeout=FINISH_WITHIN + 1.0)
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's handler (main thread only): a second Ctrl-C ends the process now, in one line."""
        if self.should_exit and sig == signal.SIGINT:
            sys.stderr.write("\ntinytitan serve: stopped at once (second Ctrl-C); open requests were cut\n")
            sys.stderr.flush()
            os._exit(FORCED_STOP)  # skips finalization: the device thread may be inside MLX
        super().handle_exit(sig, frame)


def serve(server: Server, sock: socket.socket) -> None:
    """Serve on the bound ``sock`` until SIGTERM or Ctrl-C; exit 3 if the app never started."""
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn re-raises it once it has shut down
        server.run(sockets=[sock])
    if not server.started and not server.should_exit:
        raise SystemExit(3)  # the app's startup failed (the log says why)


_CHATTER = (
    "Started server process",
    "Waiting for application",
    "Application startup complete",
    "Application shutdown complete",
    "Uvicorn running on",
    "Shutting down",
    "Finished server process",
)


def quiet_uvicorn(level: str) -> None:
    """uvicorn's start/stop chatter says what the banner says; it is shown only at debug (its other
    lines — a refused WebSocket upgrade, an error — stay)."""
    if level != "debug":
        logging.getLogger("uvicorn.error").addFilter(lambda record: not str(record.msg).startswith(_CHATTER))
