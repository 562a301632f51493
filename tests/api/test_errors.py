"""Engine errors → both wire envelopes (reference §2), for every error class, as pure functions."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from litestar.exceptions import HTTPException, NotFoundException

from tinytitan.api import errors
from tinytitan.api.errors import error_response, exception_handler, is_anthropic, request_id_of
from tinytitan.engine.errors import (
    AuthenticationFailed,
    ContextLengthExceeded,
    Forbidden,
    GenerationFailed,
    HeadersTooLarge,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    QueueFull,
    RequestTimeout,
    RequestTooLarge,
    TinyTitanError,
    UnknownModel,
    Unsupported,
    UnsupportedMediaType,
)
from tinytitan.testing.events import as_sent


def openai_error(exc: TinyTitanError) -> tuple[int, Any]:
    """The status and the envelope as sent (the function builds a struct)."""
    status, body = errors.openai_error(exc)
    return status, as_sent(body)


def anthropic_error(exc: TinyTitanError, request_id: str) -> tuple[int, Any]:
    status, body = errors.anthropic_error(exc, request_id)
    return status, as_sent(body)


def error_payload(exc: TinyTitanError, *, anthropic: bool, request_id: str) -> tuple[int, Any, dict[str, str]]:
    status, body, headers = errors.error_payload(exc, anthropic=anthropic, request_id=request_id)
    return status, as_sent(body), headers


# (error, OpenAI status, type, code, Anthropic status, type)
CLASSES: list[tuple[TinyTitanError, int, str, str, int, str]] = [
    (InvalidRequest("bad"), 400, "invalid_request_error", "invalid_value", 400, "invalid_request_error"),
    (
        ContextLengthExceeded("long"),
        400,
        "invalid_request_error",
        "context_length_exceeded",
        400,
        "invalid_request_error",
    ),
    (AuthenticationFailed("key"), 401, "authentication_error", "invalid_api_key", 401, "authentication_error"),
    (Forbidden("host"), 403, "permission_error", "forbidden", 403, "permission_error"),
    (NotFound("gone"), 404, "invalid_request_error", "not_found", 404, "not_found_error"),
    (UnknownModel("gpt-5"), 404, "invalid_request_error", "model_not_found", 404, "not_found_error"),
    (MethodNotAllowed("no"), 405, "invalid_request_error", "method_not_allowed", 405, "invalid_request_error"),
    (RequestTimeout("slow"), 408, "invalid_request_error", "request_timeout", 408, "invalid_request_error"),
    (RequestTooLarge("big"), 413, "invalid_request_error", "request_too_large", 413, "request_too_large"),
    (
        UnsupportedMediaType("type"),
        415,
        "invalid_request_error",
        "unsupported_media_type",
        415,
        "invalid_request_error",
    ),
    (
        HeadersTooLarge("head"),
        431,
        "invalid_request_error",
        "request_header_fields_too_large",
        431,
        "invalid_request_error",
    ),
    (QueueFull(), 429, "rate_limit_error", "queue_full", 529, "overloaded_error"),
    (GenerationFailed(), 500, "server_error", "internal_error", 500, "api_error"),
    (Unsupported("count"), 501, "server_error", "unsupported_operation", 501, "api_error"),
]

NAMES = [type(case[0]).__name__ for case in CLASSES]


@pytest.mark.parametrize(("exc", "status", "kind", "code", "a_status", "a_kind"), CLASSES, ids=NAMES)
def test_the_openai_envelope(
    exc: TinyTitanError, status: int, kind: str, code: str, a_status: int, a_kind: str
) -> None:
    got_status, body = openai_error(exc)
    assert got_status == status
    assert body == {
        "error": {"message": exc.message, "type": kind, **({"param": exc.param} if exc.param else {}), "code": code}
    }


@pytest.mark.parametrize(("exc", "status", "kind", "code", "a_status", "a_kind"), CLASSES, ids=NAMES)
def test_the_anthropic_envelope(
    exc: TinyTitanError, status: int, kind: str, code: str, a_status: int, a_kind: str
) -> None:
    got_status, body = anthropic_error(exc, "req_1")
    assert got_status == a_status
    assert set(body) == {"type", "error", "request_id"}
    assert (body["type"], body["error"]["type"], body["request_id"]) == ("error", a_kind, "req_1")
    assert set(body["error"]) == {"type", "message"}


def test_openai_leaves_param_out_when_there_is_none() -> None:
    assert "param" not in openai_error(InvalidRequest("bad"))[1]["error"]
    assert openai_error(InvalidRequest("bad", param="top_p"))[1]["error"]["param"] == "top_p"


def test_the_unknown_model_names_the_model_field() -> None:
    error = openai_error(UnknownModel("gpt-5"))[1]["error"]
    assert (error["param"], error["message"]) == ("model", "requested model is not available: 'gpt-5'")
    message = anthropic_error(UnknownModel("gpt-5"), "r")[1]["error"]["message"]
    assert message == "model: requested model is not available: 'gpt-5'"


def test_anthropic_prefixes_the_param_once() -> None:
    assert anthropic_error(InvalidRequest("too hot", param="temperature"), "r")[1]["error"]["message"] == (
        "temperature: too hot"
    )
    already = InvalidRequest("messages[0].content[0]: image blocks are not supported", param="messages[0].content[0]")
    assert anthropic_error(already, "r")[1]["error"]["message"] == already.message
    assert anthropic_error(InvalidRequest("bad"), "r")[1]["error"]["message"] == "bad"


def test_a_generation_failure_says_only_that() -> None:
    assert openai_error(GenerationFailed())[1]["error"]["message"] == "generation failed"
    assert anthropic_error(GenerationFailed(), "r")[1]["error"]["message"] == "generation failed"


@pytest.mark.parametrize(
    ("anthropic", "status", "kind"), [(False, 429, "rate_limit_error"), (True, 529, "overloaded_error")]
)
def test_a_full_queue_carries_retry_after(anthropic: bool, status: int, kind: str) -> None:
    got_status, body, headers = error_payload(QueueFull(retry_after=3), anthropic=anthropic, request_id="r")
    assert (got_status, headers) == (status, {"retry-after": "3"})
    assert kind in str(body)
    if anthropic:
        assert body["error"]["message"] == "Overloaded"


def test_only_a_full_queue_carries_retry_after() -> None:
    assert error_payload(InvalidRequest("x"), anthropic=False, request_id="r")[2] == {}
    assert error_payload(GenerationFailed(), anthropic=True, request_id="r")[2] == {}


def test_error_response_is_the_envelope_as_json() -> None:
    response = error_response(QueueFull(), anthropic=True, request_id="req_9")
    assert (response.status_code, response.media_type) == (529, "application/json")
    assert response.headers["retry-after"] == "1"
    assert as_sent(response.content) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_9",
    }


@pytest.mark.parametrize(
    ("path", "headers", "expected"),
    [
        ("/v1/messages", {}, True),
        ("/v1/messages/count_tokens", {}, True),
        ("/v1/models", {"anthropic-version": "2023-06-01"}, True),
        ("/v1/chat/completions", {"anthropic-version": "2023-06-01"}, True),
        ("/v1/chat/completions", {}, False),
        ("/v1/models", {"x-api-key": "k"}, False),
    ],
)
def test_is_anthropic(path: str, headers: dict[str, str], expected: bool) -> None:
    assert is_anthropic(path, headers) is expected


def test_request_id_of() -> None:
    assert request_id_of({"state": {"request_id": "req_5"}}) == "req_5"
    assert request_id_of({}) == "req_unknown"


# -- the one app handler: anything raised becomes the protocol's envelope ---------------------------


def handled(exc: Exception, path: str = "/v1/chat/completions", headers: dict[str, str] | None = None) -> Any:
    request: Any = SimpleNamespace(  # what the handler reads: the path, the headers, the scope
        url=SimpleNamespace(path=path), headers=headers or {}, scope={"state": {"request_id": "r"}}
    )
    return exception_handler(request, exc)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (NotFoundException(), 404, "not_found"),
        (HTTPException(status_code=405), 405, "method_not_allowed"),
        (HTTPException(status_code=413), 413, "request_too_large"),
        (HTTPException(status_code=415), 415, "unsupported_media_type"),
        (HTTPException(status_code=400, detail="Validation failed"), 400, "invalid_request"),
        (RecursionError(), 400, "invalid_json"),
        (InvalidRequest("x", param="p"), 400, "invalid_value"),
    ],
    ids=["404", "405", "413", "415", "other 4xx", "nested too deeply", "our own"],
)
def test_the_handler_maps_framework_errors(exc: Exception, status: int, code: str) -> None:
    response = handled(exc)
    assert response.status_code == status
    assert as_sent(response.content)["error"]["code"] == code


def test_an_unexpected_exception_is_a_500_without_details(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="tinytitan.api"):
        response = handled(KeyError("secret internals"))
    assert response.status_code == 500
    assert as_sent(response.content)["error"] == {
        "message": "internal error",
        "type": "server_error",
        "code": "internal_error",
    }
    assert "secret internals" not in str(as_sent(response.content))
    assert any(r.exc_info for r in caplog.records)  # the details go to the server log


def test_the_handler_picks_the_envelope_by_path_and_header() -> None:
    assert as_sent(handled(NotFound("x"), path="/v1/messages").content)["type"] == "error"
    assert (
        as_sent(handled(NotFound("x"), path="/v1/models", headers={"anthropic-version": "1"}).content)["request_id"]
        == "r"
    )
    assert "type" not in as_sent(handled(NotFound("x"), path="/v1/models").content)
