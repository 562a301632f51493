"""``encode_stream`` (api/streaming.py): the ONE ending of every protocol's stream, on a recording
encoder and on the three real ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
import pytest

from tinytitan.api.anthropic.encode import MessagesStream
from tinytitan.api.chat_completions.encode import ChatStream
from tinytitan.api.responses.encode import OutputBuilder, ResponsesStream, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.api.sse import SSE
from tinytitan.api.streaming import Encoder, encode_stream
from tinytitan.engine.errors import GenerationFailed, InvalidRequest, TinyTitanError
from tinytitan.engine.events import Event, Finished, TextDelta
from tinytitan.engine.job import Completion
from tinytitan.engine.request import Sampling
from tinytitan.testing.events import encoded

DONE = Finished("stop")


class Recording:
    """An encoder whose frames say which call made them."""

    def __init__(self) -> None:
        self.failures: list[TinyTitanError] = []

    def start(self) -> list[SSE]:
        return [SSE("start")]

    def feed(self, event: Event) -> list[SSE]:
        return [SSE(f"feed {type(event).__name__}")]

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        self.failures.append(exc)
        return [SSE("fail")]

    def end(self) -> list[SSE]:
        return [SSE("end")]

    def keepalive(self) -> None:
        return None

    def object(self, result: Completion) -> msgspec.Struct:
        raise AssertionError("not for streams")


def frames(items: list[Any]) -> tuple[list[str], Recording]:
    encoder = Recording()
    return [frame.data for frame in encoded(items, encoder)], encoder


def test_a_finished_stream_is_start_events_then_end() -> None:
    sent, encoder = frames([TextDelta("a"), TextDelta("b"), DONE])
    assert sent == ["start", "feed TextDelta", "feed TextDelta", "feed Finished", "end"]
    assert encoder.failures == []


def test_nothing_after_finished_is_read() -> None:
    sent, _ = frames([DONE, TextDelta("late"), RuntimeError("never reached")])
    assert sent == ["start", "feed Finished", "end"]


def test_a_failure_is_the_encoders_error_frame_then_the_end() -> None:
    refusal = InvalidRequest("the grammar cannot continue", param="response_format")
    sent, encoder = frames([TextDelta("a"), refusal])
    assert sent == ["start", "feed TextDelta", "fail", "end"]
    assert encoder.failures == [refusal]


def test_an_unexpected_exception_becomes_generation_failed(caplog: pytest.LogCaptureFixture) -> None:
    sent, encoder = frames([TextDelta("a"), KeyError("internals")])
    assert sent == ["start", "feed TextDelta", "fail", "end"]
    (failure,) = encoder.failures
    assert isinstance(failure, GenerationFailed) and failure.message == "generation failed"
    assert "a stream failed" in caplog.text


@pytest.mark.parametrize("items", [[], [TextDelta("cut")]], ids=["no events", "cut short"])
def test_events_ending_without_finished_are_a_failure(items: list[Event]) -> None:
    sent, encoder = frames(items)
    assert sent[-2:] == ["fail", "end"]
    (failure,) = encoder.failures
    assert isinstance(failure, GenerationFailed)
    assert failure.message == "generation ended without finishing"


def test_closing_the_stream_closes_the_events() -> None:
    closed: list[bool] = []

    async def events() -> AsyncGenerator[Event, None]:
        try:
            yield TextDelta("a")
            yield TextDelta("b")
        finally:
            closed.append(True)

    async def main() -> list[Any]:
        stream = encode_stream(events(), Recording())
        first = [await anext(stream), await anext(stream)]  # start, the first delta
        await stream.aclose()  # the client went away
        return [frame.data for frame in first]

    assert asyncio.run(main()) == ["start", "feed TextDelta"]
    assert closed == [True]


# -- the real encoders end the same way -----------------------------------------------------------


def chat() -> Encoder:
    return ChatStream("m", include_usage=False)


def messages() -> Encoder:
    return MessagesStream("m", request_id="req_1")


def responses() -> Encoder:
    shell = response_shell(ResponsesRequest(model="m"), model="m", sampling=Sampling(0.6, 0.95), store=False)
    return ResponsesStream(OutputBuilder(shell), lambda _response: None)


@pytest.mark.parametrize("ending", [[TextDelta("cut")], [TextDelta("cut"), GenerationFailed()]], ids=["cut", "failed"])
def test_chat_sends_the_error_frame_then_done(ending: list[Any]) -> None:
    sent = encoded(ending, chat())
    error, done = sent[-2:]
    assert set(error.data) == {"error"}  # the OpenAI envelope, alone in its frame
    assert (error.data["error"]["type"], error.data["error"]["code"]) == ("server_error", "internal_error")
    assert done.data == "[DONE]"
    assert all(frame.event is None for frame in sent)


@pytest.mark.parametrize("ending", [[TextDelta("cut")], [TextDelta("cut"), GenerationFailed()]], ids=["cut", "failed"])
def test_messages_ends_with_an_error_event(ending: list[Any]) -> None:
    last = encoded(ending, messages())[-1]
    assert last.event == "error"
    assert last.data["type"] == "error" and last.data["error"]["type"] == "api_error"
    assert last.data["request_id"] == "req_1"


@pytest.mark.parametrize("ending", [[TextDelta("cut")], [TextDelta("cut"), GenerationFailed()]], ids=["cut", "failed"])
def test_responses_ends_with_response_failed(ending: list[Any]) -> None:
    last = encoded(ending, responses())[-1]
    assert last.event == "response.failed"
    assert last.data["response"]["status"] == "failed"
    assert last.data["response"]["error"]["code"] == "server_error"


@pytest.mark.parametrize("encoder", [chat, messages, responses])
def test_a_finished_stream_has_no_error_frame(encoder: Any) -> None:
    sent = encoded([TextDelta("whole"), DONE], encoder())
    assert not any(frame.event in ("error", "response.failed") for frame in sent)
    assert not any(isinstance(frame.data, dict) and "error" in frame.data and frame.data["error"] for frame in sent)
