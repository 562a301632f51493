"""The schema checks refuse what a strict client would: the SDKs' lenient models accept each of these
(a ``null`` number, an enum value off the list, an invented field on an Anthropic object)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tinytitan.api.anthropic.encode import MessagesStream
from tinytitan.api.responses.encode import OutputBuilder, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.engine.events import Finished, TextDelta
from tinytitan.engine.request import Sampling
from tinytitan.testing.events import as_sent
from tinytitan.testing.wire_schemas import (
    check_anthropic,
    check_messages_event,
    check_open_responses,
    check_responses_event,
    check_socket_event,
)


def completed() -> dict[str, Any]:
    shell = response_shell(ResponsesRequest(model="m"), model="m", sampling=Sampling(0.6, 0.95), store=False)
    builder = OutputBuilder(shell)
    builder.start()
    builder.feed(TextDelta("hi"))
    (*_, end) = builder.feed(Finished("stop"))
    event: dict[str, Any] = as_sent(end)
    return event


def test_a_completed_event_passes_and_its_response_too() -> None:
    event = completed()
    check_responses_event(event)
    check_open_responses(event["response"], "ResponseResource")


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("top_p",), None, ".response.top_p"),
        (("reasoning", "effort"), "ultra", ".response.reasoning.effort"),
        (("text", "verbosity"), "loud", ".response.text.verbosity"),
        (("output", 0, "status"), "done", ".response.output[0]"),
        (("tools",), [{"type": "web_search"}], ".response.tools[0]"),
    ],
)
def test_what_the_schema_does_not_allow_is_named(path: tuple[Any, ...], value: Any, named: str) -> None:
    event = copy.deepcopy(completed())
    target = event["response"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(AssertionError, match=re.escape(named)):
        check_responses_event(event)


def test_an_event_type_outside_the_stream_is_refused() -> None:
    with pytest.raises(AssertionError, match="not an event of the Open Responses stream"):
        check_responses_event({"type": "response.thinking", "sequence_number": 0})


def test_a_socket_error_event_has_the_transports_shape() -> None:
    check_socket_event({"type": "error", "status": 400, "error": {"code": "x", "message": "m", "param": None}})
    with pytest.raises(AssertionError, match="status"):
        check_socket_event({"type": "error", "error": {"code": "x", "message": "m"}})


def messages_events() -> list[dict[str, Any]]:
    stream = MessagesStream("m", request_id="req_1")
    frames = [*stream.start(), *stream.feed(TextDelta("hi")), *stream.feed(Finished("stop")), stream.keepalive()]
    return [as_sent(frame.data) for frame in frames]


def test_messages_events_pass() -> None:
    for event in messages_events():
        check_messages_event(event)


@pytest.mark.parametrize(
    ("index", "path", "value", "named"),
    [
        (0, ("message", "stop_reason"), "done_talking", ".message.stop_reason"),
        (0, ("message", "usage", "cost"), 3, ".message.usage"),  # a field the API does not define
        (2, ("delta", "type"), "text", ".delta"),
    ],
)
def test_what_anthropic_does_not_document_is_named(index: int, path: tuple[str, ...], value: Any, named: str) -> None:
    event = copy.deepcopy(messages_events()[index])
    target = event
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(AssertionError, match=re.escape(named)):
        check_messages_event(event)


def test_an_error_envelope_and_a_model_list() -> None:
    check_anthropic({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "ErrorResponse")
    with pytest.raises(AssertionError, match=r"\.error\.type"):
        check_anthropic({"type": "error", "error": {"type": "oops", "message": "m"}}, "ErrorResponse")
    with pytest.raises(AssertionError, match="first_id"):
        check_anthropic({"data": [], "has_more": False}, "ModelList")
