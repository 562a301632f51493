"""The one exception hierarchy of TinyTitan.

Every failure a client can see is one of these. The engine and the protocol mappers raise them;
each protocol has exactly ONE function that turns any of them into its wire envelope and HTTP
status (``tinytitan.api.errors``). Nothing below the HTTP layer knows about status codes beyond
the ``status`` hint carried here. A class states its status and stable ``code`` where it is
declared: ``class RequestTimeout(TinyTitanError, status=408, code="request_timeout")``. QueueFull's
429 is OpenAI's; the Anthropic envelope answers it with 529.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AuthenticationFailed",
    "ContextLengthExceeded",
    "Forbidden",
    "GenerationFailed",
    "HeadersTooLarge",
    "InvalidRequest",
    "MethodNotAllowed",
    "ModelLoadFailed",
    "NotFound",
    "QueueFull",
    "RequestTimeout",
    "RequestTooLarge",
    "ShuttingDown",
    "TinyTitanError",
    "UnknownModel",
    "Unsupported",
    "UnsupportedMediaType",
    "UpgradeRefused",
    "text_only",
]


class TinyTitanError(Exception):
    """Base class: ``message`` for the client, ``param`` naming the field, ``code`` a stable word.

    A subclass names its HTTP status hint and default code in its bases (inherited when left out)."""

    status: int = 500
    code: str | None = None

    def __init_subclass__(cls, *, status: int | None = None, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if status is not None:
            cls.status = status
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequest(TinyTitanError, status=400, code="invalid_value"):
    """A bad field, value or message (``param`` and ``code`` name it)."""


class ContextLengthExceeded(InvalidRequest, code="context_length_exceeded"):
    """The prompt does not fit the context window: ``tokens`` of it against ``limit``, when known."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message, param=param, code=code)
        self.tokens = tokens
        self.limit = limit


class AuthenticationFailed(TinyTitanError, status=401, code="invalid_api_key"):
    """``--api-key`` is set and the request lacks it."""


class Forbidden(TinyTitanError, status=403, code="forbidden"):
    """Refused by the Host / Origin guard."""


class NotFound(TinyTitanError, status=404, code="not_found"):
    """A stored object or a route that does not exist."""


class UnknownModel(NotFound, code="model_not_found"):
    """A model name this server does not serve."""

    def __init__(self, name: str, served: Sequence[str] = ()) -> None:
        served_note = f"; this server serves {', '.join(served)} (each also as <id>-fast)" if served else ""
        super().__init__(f"requested model is not available: '{name}'{served_note}", param="model")
        self.name = name


class MethodNotAllowed(TinyTitanError, status=405, code="method_not_allowed"):
    """A route asked with a method it does not take."""


class RequestTimeout(TinyTitanError, status=408, code="request_timeout"):
    """The request head was not received in time (slow loris)."""


class RequestTooLarge(TinyTitanError, status=413, code="request_too_large"):
    """The request body is over the body limit."""


class UnsupportedMediaType(TinyTitanError, status=415, code="unsupported_media_type"):
    """A body that is not JSON."""


class UpgradeRefused(TinyTitanError, status=426, code="websockets_disabled"):
    """A WebSocket upgrade while WebSocket mode is off (426: the client falls back to HTTP)."""


class HeadersTooLarge(TinyTitanError, status=431, code="request_header_fields_too_large"):
    """The request head is over the header limit."""


class QueueFull(TinyTitanError, status=429, code="queue_full"):
    """Every slot and queue place is taken; the client retries after ``retry_after`` seconds."""

    def __init__(self, message: str = "the server is busy; try again shortly", retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GenerationFailed(TinyTitanError, status=500, code="internal_error"):
    """The decoder raised; the details are only in the server log."""

    def __init__(self, message: str = "generation failed") -> None:
        super().__init__(message)


class ShuttingDown(TinyTitanError, status=503, code="server_shutting_down"):
    """The server is stopping: it takes no new work and ends what is still running."""

    def __init__(self, message: str = "the server is shutting down") -> None:
        super().__init__(message)


class ModelLoadFailed(TinyTitanError, status=503, code="model_unavailable"):
    """A model's weights could not be loaded (a catalog switch to a model whose files went missing or
    broke); the message names the model and the cause. The server itself is fine: other models answer."""


class Unsupported(TinyTitanError, status=501, code="unsupported_operation"):
    """The backend cannot do this (count_tokens without a tokenizer)."""


def text_only(what: str, param: str) -> InvalidRequest:
    """The one refusal of non-text content (images, files, documents …), naming the part.

    ``what`` is the protocol's own noun: ``"content parts of type 'image_url'"``, ``"image blocks"``.
    """
    return InvalidRequest(
        f"{what} are not supported; this server is text-only", param=param, code="unsupported_content"
    )
