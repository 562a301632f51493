"""What ``tinytitan serve``'s port answers before the web stack is up (a GGUF file converting).

``serve`` binds its port first; while it still reads or converts the model — before uvicorn takes
the socket over — ``EarlyAnswers`` answers on it from a thread, once loading has said its first
step (a refusal in the first instants leaves the port as it was): ``/health`` 200 and ``/ready`` 503
with ``{"status": "loading", "step": …}``, as the server answers them once it runs, each connection
closed after its answer. Any other request waits, as it would in the listen backlog: its connection
is held, and once the block ends it is relayed to the same port (where the server then accepts it),
its bytes passed both ways until either side closes. Plain sockets only (the CLI imports this early).
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
_HEALTH = ("/health", "/ready")


class EarlyAnswers:
    """``with EarlyAnswers(sock) as early:`` answers on ``sock`` until the block ends; ``early.note``
    takes each progress line (``tinytitan.engine.readiness.listen``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.step: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tinytitan-early-answers", daemon=True)
        self._held: list[tuple[socket.socket, bytes]] = []  # requests for the server, with what they sent

    def note(self, line: str) -> None:
        self.step = line

    @property
    def held(self) -> int:
        """Requests waiting for the server."""
        return len(self._held)

    def __enter__(self) -> EarlyAnswers:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        host, port = self.sock.getsockname()[:2]
        loopback = "::1" if ":" in host else "127.0.0.1"
        for conn, sent in self._held:  # to the server, which accepts them from the backlog once it runs
            target = (host if host not in ("0.0.0.0", "::") else loopback, port)
            threading.Thread(target=_relay, args=(conn, sent, target), name="tinytitan-relay", daemon=True).start()
        self._held = []

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.step is None:  # nothing under way to report yet (a stub, a quick check)
                self._stop.wait(0.05)
                continue
            if not select.select([self.sock], [], [], 0.05)[0]:
                continue
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the client left, or the socket was closed (a refusal)
                continue
            try:
                held = self._answer(conn)
            except OSError:
                held = False
            if not held:
                conn.close()

    def _answer(self, conn: socket.socket) -> bool:
        """Answer a health check; True when the connection is held for the server instead."""
        conn.settimeout(2.0)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
            chunk = conn.recv(4096)
            if not chunk:
                return False
            head += chunk
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        if path not in _HEALTH:
            self._held.append((conn, head))
            return True
        state: dict[str, Any] = {"status": "loading", **({"step": self.step} if self.step else {})}
        status = 200 if path == "/health" else 503
        payload = json.dumps(state, separators=(",", ":")).encode()
        answer = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
        ).encode("latin-1")
        conn.sendall(answer + (b"" if method == "HEAD" else payload))
        return False


def _relay(client: socket.socket, sent: bytes, target: tuple[str, int]) -> None:
    """Pass ``sent`` and then every byte both ways between ``client`` and ``target`` until one closes."""
    with client, contextlib.suppress(OSError):
        client.settimeout(None)
        with socket.create_connection(target) as upstream:
            upstream.sendall(sent)
            other = {client: upstream, upstream: client}
            while True:
                for side in select.select(list(other), [], [])[0]:
                    data = side.recv(65536)
                    if not data:
                        return
                    other[side].sendall(data)
