"""The HTTP/1.1 connection layer: uvicorn's h11 protocol with two limits it lacks.

- **Header size.** A request head (request line + headers) over ``header_limit`` bytes → 431 in the
  protocol's error envelope, and the connection closes. (httptools has no limit at all, and h11's
  own limit answers a plain-text 400; h11's stays on as a backstop.)
- **Header-read timeout (slow loris).** A connection that does not finish sending a request head
  within ``header_timeout`` seconds of connecting — or of starting the next head on a kept-alive
  connection — gets 408 and is closed, so trickled headers cannot pin connections forever. Other
  requests are never blocked meanwhile (each connection is its own asyncio protocol).

Both ``tinytitan serve`` and ``tinytitan.testing.server`` take their uvicorn options from
``uvicorn_options`` so tests run the same transport as production.

The subclass reads uvicorn's per-connection state (``conn``, ``transport``, ``loop``, ``cycle``,
``logger``) and calls its ``_unset_keepalive_if_required``: ``uvicorn_lacks()`` checks them on a
protocol built for the purpose, and where one is gone (a uvicorn release past the bound in
``pyproject.toml``) the server runs uvicorn's plain h11 protocol, without these two limits, and says
so in one log line. ``tests/api/test_transport.py`` is the contract: run it before lifting the bound.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from tinytitan.api.errors import error_payload, is_anthropic
from tinytitan.api.wire import encode
from tinytitan.engine.errors import HeadersTooLarge, RequestTimeout, TinyTitanError
from tinytitan.engine.request import new_id
from tinytitan.settings import Settings

__all__ = ["hardened_h11", "uvicorn_lacks", "uvicorn_options"]

log = logging.getLogger("tinytitan.server")
_CONNECTION_STATE = ("conn", "transport", "loop", "cycle", "logger")

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


def _refusal(exc: TinyTitanError, head: bytes) -> bytes:
    """A complete ``connection: close`` response in the envelope of the path on the request line."""
    lines = head.split(b"\r\n")
    target = lines[0].split(b" ")
    path = target[1].decode("latin-1") if len(target) > 1 else ""
    names = {line.split(b":", 1)[0].strip().lower().decode("latin-1") for line in lines[1:] if b":" in line}
    anthropic = is_anthropic(path, names)
    request_id = new_id("req_")
    status, body, _ = error_payload(exc, anthropic=anthropic, request_id=request_id)
    raw = encode(body)
    response = [
        b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Error")),
        b"content-type: application/json",
        b"content-length: %d" % len(raw),
        b"openai-version: 2020-10-01",
        b"connection: close",
        *([b"request-id: " + request_id.encode()] if anthropic else []),
    ]
    return b"\r\n".join(response) + b"\r\n\r\n" + raw


def hardened_h11(header_limit: int, header_timeout: float) -> type[H11Protocol]:
    """uvicorn's ``H11Protocol`` with the header-size limit and the header-read timeout."""

    class HardenedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        # H11Protocol's own signature: uvicorn narrows asyncio's BaseTransport to the Transport it is
        # given, which mypy reports against asyncio.BaseProtocol for every subclass
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:  # a request head is (still) arriving
                pending = self.conn.trailing_data[0] + data
                end = pending.find(b"\r\n\r\n")
                if (len(pending) if end < 0 else end + 4) > header_limit:
                    self._refuse(HeadersTooLarge(f"request headers exceed {header_limit} bytes"), pending)
                    return
            super().data_received(data)
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                self._disarm_head_timer()  # closed, or a whole head arrived: the request is under way
            elif self.conn.trailing_data[0]:
                self._arm_head_timer()  # the next head on a kept-alive connection has begun

        def _arm_head_timer(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                pending = self.conn.trailing_data[0]
                if pending:
                    self._refuse(RequestTimeout("request headers were not received in time"), pending)
                elif self.cycle is None:
                    self.transport.close()  # connected and never sent a byte

        def _refuse(self, exc: TinyTitanError, head: bytes) -> None:
            self._disarm_head_timer()
            self._unset_keepalive_if_required()
            self.logger.warning("refused a connection: %s", exc.message)
            self.transport.write(_refusal(exc, head))
            self.transport.close()

    return HardenedH11Protocol


def uvicorn_lacks() -> list[str]:
    """What of uvicorn's h11 protocol ``hardened_h11`` relies on is missing in this uvicorn (empty: all there)."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    async def app(scope: Any, receive: Any, send: Any) -> None:  # never called: the protocol is only built
        raise NotImplementedError

    loop = asyncio.new_event_loop()
    try:
        protocol = H11Protocol(Config(app=app, log_config=None), ServerState(), {}, _loop=loop)
    except Exception as exc:  # a changed constructor
        return [f"H11Protocol(config, server_state, app_state, _loop) ({type(exc).__name__}: {exc})"]
    finally:
        loop.close()
    missing = [f"H11Protocol.{name}" for name in _CONNECTION_STATE if not hasattr(protocol, name)]
    if not callable(getattr(protocol, "_unset_keepalive_if_required", None)):
        missing.append("H11Protocol._unset_keepalive_if_required()")
    if not isinstance(getattr(getattr(protocol, "conn", None), "trailing_data", None), tuple):
        missing.append("h11.Connection.trailing_data")
    return missing


_checked: list[str] | None = None


def _http_protocol(settings: Settings) -> Any:
    """The hardened protocol, or uvicorn's own h11 (one warning per process) where it lacks what that needs."""
    global _checked
    if _checked is None:
        _checked = uvicorn_lacks()
        if _checked:
            import uvicorn

            log.warning(
                "uvicorn %s lacks %s: serving without the request-header size limit and read timeout",
                uvicorn.__version__,
                ", ".join(_checked),
            )
    return "h11" if _checked else hardened_h11(settings.header_limit, settings.header_timeout)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The transport options of every server we start (CLI and tests alike)."""
    return {
        "http": _http_protocol(settings),
        "h11_max_incomplete_event_size": settings.header_limit + 1024 * 1024,  # backstop
        "timeout_keep_alive": settings.keep_alive_timeout,
        "ws": "websockets-sansio",  # Responses over WebSocket (the guard refuses upgrades when it is off)
        "ws_max_size": settings.body_limit,  # a frame carries a whole request body, as a POST does
    }
