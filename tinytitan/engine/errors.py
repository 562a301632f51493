"""The one exception hierarchy of TinyTitan.

Every failure a client can see is one of these. The engine and the protocol mappers raise them;
each protocol has exactly ONE function that turns any of them into its wire envelope and HTTP
status (``tinytitan.api.errors``). Nothing below the HTTP layer knows about status codes beyond
the ``status`` hint carried here.

    TinyTitanError
    ├── InvalidRequest        400  bad field / value / message (param + code name it)
    │   └── ContextLengthExceeded  400 the prompt does not fit the context window
    ├── AuthenticationFailed  401  --api-key set and the request lacks it
    ├── Forbidden             403  Host / Origin guard
    ├── NotFound              404  a stored object or a route
    │   └── UnknownModel      404  a model name this server does not serve
    ├── MethodNotAllowed      405
    ├── RequestTimeout        408  the request head was not received in time (slow loris)
    ├── RequestTooLarge       413
    ├── UnsupportedMediaType  415
    ├── HeadersTooLarge       431  the request head is over the header limit
    ├── QueueFull             429 (OpenAI) / 529 (Anthropic), with Retry-After
    ├── GenerationFailed      500  the decoder raised; details only in the server log
    └── Unsupported           501  the backend cannot do this (count_tokens without a tokenizer)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AuthenticationFailed",
    "ContextLengthExceeded",
    "Forbidden",
    "GenerationFailed",
    "HeadersTooLarge",
    "InvalidRequest",
    "MethodNotAllowed",
    "NotFound",
    "QueueFull",
    "RequestTimeout",
    "RequestTooLarge",
    "TinyTitanError",
    "UnknownModel",
    "Unsupported",
    "UnsupportedMediaType",
    "text_only",
]


class TinyTitanError(Exception):
    """Base class: ``message`` for the client, ``param`` naming the field, ``code`` a stable word."""

    status: int = 500
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class InvalidRequest(TinyTitanError):
    status = 400
    code = "invalid_value"


class ContextLengthExceeded(InvalidRequest):
    code = "context_length_exceeded"


class AuthenticationFailed(TinyTitanError):
    status = 401
    code = "invalid_api_key"


class Forbidden(TinyTitanError):
    status = 403
    code = "forbidden"


class NotFound(TinyTitanError):
    status = 404
    code = "not_found"


class UnknownModel(NotFound):
    code = "model_not_found"

    def __init__(self, name: str, served: Sequence[str] = ()) -> None:
        served_note = f"; this server serves {', '.join(served)} (each also as <id>-fast)" if served else ""
        super().__init__(f"requested model is not available: '{name}'{served_note}", param="model")
        self.name = name


class MethodNotAllowed(TinyTitanError):
    status = 405
    code = "method_not_allowed"


class RequestTimeout(TinyTitanError):
    status = 408
    code = "request_timeout"


class RequestTooLarge(TinyTitanError):
    status = 413
    code = "request_too_large"


class UnsupportedMediaType(TinyTitanError):
    status = 415
    code = "unsupported_media_type"


class HeadersTooLarge(TinyTitanError):
    status = 431
    code = "request_header_fields_too_large"


class QueueFull(TinyTitanError):
    status = 429
    code = "queue_full"

    def __init__(self, message: str = "the server is busy; try again shortly", retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GenerationFailed(TinyTitanError):
    status = 500
    code = "internal_error"

    def __init__(self, message: str = "generation failed") -> None:
        super().__init__(message)


class Unsupported(TinyTitanError):
    status = 501
    code = "unsupported_operation"


def text_only(what: str, param: str) -> InvalidRequest:
    """The one refusal of non-text content (images, files, documents …), naming the part.

    ``what`` is the protocol's own noun: ``"content parts of type 'image_url'"``, ``"image blocks"``.
    """
    return InvalidRequest(
        f"{what} are not supported; this server is text-only", param=param, code="unsupported_content"
    )
