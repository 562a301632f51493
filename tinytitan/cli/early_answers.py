"""What ``tinytitan serve``'s port answers before the web stack is up (a GGUF file converting).

``serve`` binds its port first; while it still reads or converts the model — before uvicorn takes
the socket over — ``EarlyAnswers`` answers on it from a thread: ``/health`` 200 and ``/ready`` 503
with ``{"status": "loading", "step": …}``, as the server answers them once it runs, and any other
request 503 with ``Retry-After`` (nothing can be served yet). One connection at a time, each closed
after its answer; plain sockets only (the CLI imports this before anything heavy).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
from typing import Any

__all__ = ["EarlyAnswers"]

_HEAD_LIMIT = 16 * 1024
_REASONS = {200: "OK", 503: "Service Unavailable"}


class EarlyAnswers:
    """``with EarlyAnswers(sock) as early:`` answers on ``sock`` until the block ends; ``early.note``
    takes each progress line (``tinytitan.engine.readiness.listen``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.step: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tinytitan-early-answers", daemon=True)

    def note(self, line: str) -> None:
        self.step = line

    def __enter__(self) -> EarlyAnswers:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.sock], [], [], 0.05)[0]:
                continue
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the client left, or the socket was closed (a refusal)
                continue
            with conn, contextlib.suppress(OSError):
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        state: dict[str, Any] = {"status": "loading", **({"step": self.step} if self.step else {})}
        if path == "/health":
            status, body, extra = 200, state, ""
        elif path == "/ready":
            status, body, extra = 503, state, ""
        else:
            doing = f" ({self.step})" if self.step else ""
            message = f"the model is not in yet{doing}; retry when /ready answers 200"
            status, extra = 503, "retry-after: 2\r\n"
            body = {"error": {"message": message, "type": "server_error", "code": "model_loading"}}
        payload = json.dumps(body, separators=(",", ":")).encode()
        answer = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n{extra}connection: close\r\n\r\n"
        ).encode("latin-1")
        conn.sendall(answer + (b"" if method == "HEAD" else payload))
