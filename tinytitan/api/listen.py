"""The listening socket ``tinytitan serve`` binds before it loads anything (handed to uvicorn later).

Binding first finds a port in use in the first second, not after the model has loaded, and lets a
client connect (and wait) while the weights come in. Only ``socket`` here: the CLI imports it.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["ListenError", "listen"]

BACKLOG = 2048  # uvicorn's default


class ListenError(ValueError):
    """The address cannot be listened on; the message says why and what to do."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (IPv6 when ``host`` has a colon)."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Nagle's algorithm off for every connection (TCP_NODELAY, inherited from the listening socket;
    # asyncio sets it itself only on sockets made with proto=IPPROTO_TCP): with it on, the second
    # piece of a response (its body after its headers, an SSE event after the last) waited ~40 ms
    # for the client's delayed ACK — every request on a kept-alive connection took 44 ms, not 0.5
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart reuses a port in TIME_WAIT
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(f"{shown} is in use (another server? try --port)") from None
        if exc.errno == errno.EACCES:
            raise ListenError(
                f"cannot listen on {shown}: permission denied (ports below 1024 need privileges)"
            ) from None
        reason = exc.strerror or str(exc)
        raise ListenError(f"cannot listen on {shown}: {reason} (check --host)") from None
    sock.set_inheritable(False)
    return sock
