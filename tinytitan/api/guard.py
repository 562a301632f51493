"""The transport guard (reference §1), a plain ASGI middleware in front of every route.

- assigns the request id (``req_<32hex>``) and stamps ``openai-version`` on every response and
  ``request-id`` on Anthropic ones;
- the DNS-rebinding guard: a ``Host`` that is not loopback or the configured host → 403;
- the Origin rule: a non-loopback ``Origin`` (``null`` included) → 403 unless listed with
  ``--cors-origin`` (then CORS headers are sent, and preflights answered);
- the optional API key: with ``--api-key`` every route but ``/health`` and ``/ready`` needs it → 401;
- POST bodies must be ``application/json`` → 415 (so a CORS "simple" text/plain POST is never parsed);
  a compressed one is decoded next, inside it (``tinytitan.api.encoding``);
- a WebSocket upgrade passes the same Host, Origin and key checks; it is refused (an HTTP answer in
  the OpenAI envelope, through the ASGI WebSocket denial response) on any path but
  ``/v1/responses`` (404), and with 426 when WebSocket mode is off — Codex then falls back to HTTP.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable

from litestar.enums import ScopeType
from litestar.types import (
    ASGIApp,
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    HTTPScope,
    Message,
    Receive,
    Scope,
    Send,
    WebSocketScope,
)

from tinytitan.api.errors import error_payload, is_anthropic
from tinytitan.api.wire import encode
from tinytitan.engine.errors import (
    AuthenticationFailed,
    Forbidden,
    NotFound,
    TinyTitanError,
    UnsupportedMediaType,
    UpgradeRefused,
)
from tinytitan.engine.request import new_id

__all__ = ["GuardConfig", "guarded", "refusal"]

_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
_LOOPBACK_ORIGIN = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$", re.IGNORECASE)
_NO_BODY_POSTS = ("/v1/models/unload", "/cancel")
WEBSOCKET_PATH = "/v1/responses"


class GuardConfig:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        api_key: str | None = None,
        cors_origins: Iterable[str] = (),
        websockets: bool = True,
    ):
        self.hosts = set(_LOOPBACK_HOSTS)
        if host not in ("0.0.0.0", "::"):
            self.hosts.add(host.lower())
        self.any_host = host in ("0.0.0.0", "::")
        self.api_key = api_key
        self.cors_origins = {o.rstrip("/") for o in cors_origins}
        self.websockets = websockets


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _headers(scope: HTTPScope | WebSocketScope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _check(scope: HTTPScope | WebSocketScope, headers: dict[str, str], config: GuardConfig) -> str | None:
    """Raise the guard's refusal; return the allowed CORS origin, if any."""
    host = headers.get("host")
    if host is not None and not config.any_host and _host_name(host) not in config.hosts:
        raise Forbidden("host not allowed")
    origin = headers.get("origin")
    cors: str | None = None
    # "null" is what sandboxed iframes, data: and file: pages send: a web page all the same
    if origin is not None and not _LOOPBACK_ORIGIN.match(origin):
        if origin.rstrip("/") not in config.cors_origins:
            raise Forbidden("origin not allowed; start the server with --cors-origin to allow it")
        cors = origin
    method = scope.get("method", "GET")  # a WebSocket upgrade is a GET
    if method == "OPTIONS" and cors is not None:
        return cors
    path = scope.get("path", "")
    if config.api_key and path not in ("/health", "/ready"):
        auth = headers.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else headers.get("x-api-key")
        if not given or not secrets.compare_digest(given, config.api_key):
            raise AuthenticationFailed("missing or invalid API key")
    if method == "POST":
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        has_body = (
            "content-type" in headers
            or "transfer-encoding" in headers
            or headers.get("content-length", "0").strip() not in ("", "0")
        )
        if media != "application/json" and (has_body or not path.endswith(_NO_BODY_POSTS)):
            raise UnsupportedMediaType(f"content-type must be application/json, got '{media or 'none'}'")
    return cors


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-credentials", b"true"),
        (b"vary", b"Origin"),
    ]


def _start(status: int, headers: list[tuple[bytes, bytes]]) -> HTTPResponseStartEvent:
    return {"type": "http.response.start", "status": status, "headers": headers}


def _body(body: bytes) -> HTTPResponseBodyEvent:
    return {"type": "http.response.body", "body": body, "more_body": False}


def refusal(
    exc: TinyTitanError, *, anthropic: bool, request_id: str
) -> tuple[HTTPResponseStartEvent, HTTPResponseBodyEvent]:
    """The two ASGI events of an HTTP error answer in the protocol's envelope (before any route)."""
    status, body, err_headers = error_payload(exc, anthropic=anthropic, request_id=request_id)
    raw = encode(body)
    start_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    start_headers += [(k.encode(), v.encode()) for k, v in err_headers.items()]
    return _start(status, start_headers), _body(raw)


def _check_upgrade(scope: WebSocketScope, headers: dict[str, str], config: GuardConfig) -> None:
    _check(scope, headers, config)
    path = scope.get("path", "")
    if path != WEBSOCKET_PATH:
        raise NotFound(f"no WebSocket endpoint at {path}; Responses over WebSocket is {WEBSOCKET_PATH}")
    if not config.websockets:
        raise UpgradeRefused(
            "WebSocket mode is off on this server (serve --no-websockets); use POST /v1/responses over HTTP"
        )


async def _deny_upgrade(exc: TinyTitanError, send: Send) -> None:
    """Refuse a WebSocket upgrade with an HTTP answer (uvicorn's WebSocket denial response)."""
    status, body, err_headers = error_payload(exc, anthropic=False, request_id=new_id("req_"))
    raw = encode(body)
    headers = [(b"content-type", b"application/json"), (b"openai-version", b"2020-10-01")]
    headers += [(k.encode(), v.encode()) for k, v in err_headers.items()]
    if status == 426:  # RFC 9110 §15.5.22: a 426 names the protocol in Upgrade
        headers.append((b"upgrade", b"websocket"))
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": raw, "more_body": False})


def guarded(app: ASGIApp, config: GuardConfig) -> ASGIApp:
    """Wrap the whole app (not only matched routes, so 404 / 405 answers are stamped too)."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.WEBSOCKET:
            try:
                _check_upgrade(scope, _headers(scope), config)
            except TinyTitanError as exc:
                await _deny_upgrade(exc, send)
                return
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        request_id = new_id("req_")
        scope.setdefault("state", {})["request_id"] = request_id
        headers = _headers(scope)
        anthropic = is_anthropic(scope.get("path", ""), headers)
        extra = [(b"openai-version", b"2020-10-01")]
        if anthropic:
            extra.append((b"request-id", request_id.encode()))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            cors = _check(scope, headers, config)
        except TinyTitanError as exc:
            for event in refusal(exc, anthropic=anthropic, request_id=request_id):
                await send_with_headers(event)
            return
        if cors is not None:
            extra.extend(_cors_headers(cors))
            if scope["method"] == "OPTIONS":
                extra.extend(
                    [
                        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                        (b"access-control-allow-headers", b"*"),
                        (b"access-control-max-age", b"600"),
                    ]
                )
                await send_with_headers(_start(204, []))
                await send(_body(b""))
                return
        await app(scope, receive, send_with_headers)

    return middleware
