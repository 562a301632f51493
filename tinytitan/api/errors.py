"""Engine errors → wire envelopes (reference §2). One function per protocol, one app handler.

``openai_error`` and ``anthropic_error`` are the only places an error body is built — for plain
responses, for the transport guard and for mid-stream error frames alike.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException

from tinytitan.api.wire import UNSET, AnthropicError, AnthropicErrorBody, OpenAIError, OpenAIErrorBody
from tinytitan.engine.errors import (
    ContextLengthExceeded,
    GenerationFailed,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    QueueFull,
    RequestTooLarge,
    TinyTitanError,
    UnsupportedMediaType,
)

__all__ = [
    "anthropic_error",
    "error_payload",
    "error_response",
    "exception_handler",
    "is_anthropic",
    "openai_error",
    "request_id_of",
]

log = logging.getLogger("tinytitan.api")

_OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def openai_error(exc: TinyTitanError) -> tuple[int, OpenAIError]:
    """The OpenAI envelope ``{"error": {message, type, param?, code}}`` and its status."""
    status = exc.status
    kind = "server_error" if status >= 500 else _OPENAI_TYPES.get(status, "invalid_request_error")
    param = UNSET if exc.param is None else exc.param
    return status, OpenAIError(OpenAIErrorBody(exc.message, kind, exc.code, param))


def anthropic_error(exc: TinyTitanError, request_id: str) -> tuple[int, AnthropicError]:
    """The Anthropic envelope ``{"type": "error", "error": {type, message}, "request_id"}``."""
    status = 529 if isinstance(exc, QueueFull) else exc.status
    kind = "api_error" if status >= 500 and status != 529 else _ANTHROPIC_TYPES.get(status, "invalid_request_error")
    message = "Overloaded" if isinstance(exc, QueueFull) else exc.message
    if isinstance(exc, ContextLengthExceeded) and exc.tokens is not None and exc.limit is not None:
        # the API's own words: Claude Code reads them to trim its conversation (or compact) and retry
        message = f"prompt is too long: {exc.tokens} tokens > {exc.limit} maximum"
    elif exc.param is not None and not message.startswith(f"{exc.param}:"):
        message = f"{exc.param}: {message}"
    return status, AnthropicError(AnthropicErrorBody(kind, message), request_id)


def is_anthropic(path: str, headers: Any) -> bool:
    """Whether a request is answered in the Anthropic envelope: a Messages path, or any request
    carrying ``anthropic-version`` (``headers``: anything that answers ``in`` with lower-case names)."""
    return path.startswith("/v1/messages") or "anthropic-version" in headers


def request_id_of(scope: Any) -> str:
    state = scope.get("state") or {}
    return str(state.get("request_id", "req_unknown"))


def error_payload(
    exc: TinyTitanError, *, anthropic: bool, request_id: str
) -> tuple[int, OpenAIError | AnthropicError, dict[str, str]]:
    """Status, envelope and extra headers (``Retry-After`` on a full queue) for either protocol."""
    status, body = anthropic_error(exc, request_id) if anthropic else openai_error(exc)
    headers = {"retry-after": str(exc.retry_after)} if isinstance(exc, QueueFull) else {}
    return status, body, headers


def error_response(exc: TinyTitanError, *, anthropic: bool, request_id: str) -> Response[Any]:
    status, body, headers = error_payload(exc, anthropic=anthropic, request_id=request_id)
    return Response(content=body, status_code=status, headers=headers, media_type="application/json")


def _from_litestar(exc: Exception) -> TinyTitanError:
    if isinstance(exc, TinyTitanError):
        return exc
    if isinstance(exc, HTTPException):
        status = exc.status_code
        if status == 404:
            return NotFound("no such route")
        if status == 405:
            return MethodNotAllowed("method not allowed on this route")
        if status == 413:
            return RequestTooLarge("request body too large")
        if status == 415:
            return UnsupportedMediaType("content-type must be application/json")
        if 400 <= status < 500:
            return InvalidRequest(str(exc.detail), code="invalid_request")
    if isinstance(exc, RecursionError):
        # a client JSON value nested deeper than an encoder or copier can walk (it decoded, barely)
        log.warning("request refused: %s", exc)
        return InvalidRequest("malformed JSON request: nested too deeply", code="invalid_json")
    log.error("unhandled error", exc_info=exc)
    return GenerationFailed("internal error")


def exception_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """The one handler registered on the app: any exception → the protocol's envelope."""
    err = _from_litestar(exc)
    return error_response(
        err, anthropic=is_anthropic(request.url.path, request.headers), request_id=request_id_of(request.scope)
    )
