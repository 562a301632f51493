"""Every answer and stream event the encoders make is a ``wire`` struct that decodes strictly back into
its own type — so what the OpenAPI document says of it (from the same types) is what a client gets."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tinytitan.api.anthropic import wire as anthropic_wire
from tinytitan.api.anthropic.encode import MessagesStream, message_object
from tinytitan.api.chat_completions import wire as chat_wire
from tinytitan.api.chat_completions.encode import ChatStream, completion_object
from tinytitan.api.errors import anthropic_error, openai_error
from tinytitan.api.responses import wire as responses_wire
from tinytitan.api.responses import wire_events as responses_events
from tinytitan.api.responses.encode import OutputBuilder, ResponsesStream, compaction_object, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.api.responses.websocket import socket_error
from tinytitan.api.sse import SSE
from tinytitan.api.wire import Tagged, encode, kind
from tinytitan.engine.errors import GenerationFailed, InvalidRequest, QueueFull, TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.passes.compaction import CompactionResult
from tinytitan.engine.request import Sampling
from tinytitan.testing.events import frames

USAGE = Usage(prompt_tokens=10, cached_tokens=4, completion_tokens=6, reasoning_tokens=2)
CALL = ToolCall("call_1", "read", '{"path": "a"}')
NAMESPACED = ToolCall("call_2", "grep", "{}", namespace="fs")
# every kind of engine event, every way a generation ends
CUSTOM = ToolCall(
    "call_9", "apply_patch", '*** Begin Patch\n*** Add File: a\n+"x" {y} \\\n*** End Patch\n', type="custom"
)
RUNS: list[list[Event | BaseException]] = [
    [ReasoningDelta("hm"), TextDelta("héllo"), CALL, NAMESPACED, Finished("tool_calls", USAGE)],
    [CUSTOM, Finished("tool_calls", USAGE)],
    [TextDelta("a"), Finished("length", USAGE)],
    [Finished("stop", USAGE, stop_sequence="END")],
    [ReasoningDelta("only thinking"), Finished("stop")],
    [TextDelta("cut short")],
    [TextDelta("a"), GenerationFailed("boom")],
    [QueueFull(retry_after=2)],
]
ERRORS: list[TinyTitanError] = [
    InvalidRequest("bad", param="top_p"),
    InvalidRequest("bad"),
    QueueFull(),
    GenerationFailed(),
]


def roundtrips(value: Any) -> None:
    """``value`` is a struct; its JSON decodes strictly into its own type, equal to it."""
    assert isinstance(value, msgspec.Struct), value
    assert msgspec.json.decode(encode(value), type=type(value), strict=True) == value


def check_frames(sent: list[SSE], events: tuple[type, ...]) -> set[type]:
    kinds: set[type] = set()
    for frame in sent:
        if frame.data == "[DONE]":
            continue
        assert isinstance(frame.data, events), frame.data
        roundtrips(frame.data)
        if isinstance(frame.data, Tagged) and frame.event is not None:
            assert frame.event == kind(frame.data)  # `event:` names the data's `type`
        kinds.add(type(frame.data))
    return kinds


def completion(*items: Event) -> Completion:
    texts = [e.text for e in items if isinstance(e, TextDelta)]
    thoughts = [e.text for e in items if isinstance(e, ReasoningDelta)]
    calls = [e for e in items if isinstance(e, ToolCall)]
    finished = next((e for e in items if isinstance(e, Finished)), Finished("stop"))
    return Completion("".join(texts), "".join(thoughts), calls, finished, list(items))


def responses_stream(*, queued: bool = False) -> ResponsesStream:
    """``queued``: a request that waits for a slot until its first event (``response.queued``)."""
    wire = ResponsesRequest(model="m", tools=[{"type": "function", "name": "read"}], metadata={"k": "v"})
    shell = response_shell(wire, model="m", sampling=Sampling(), store=True)
    return ResponsesStream(OutputBuilder(shell, waiting=lambda: queued), print)


# -- Chat Completions ---------------------------------------------------------------------------


def test_every_chat_frame_is_a_chunk_or_the_error_envelope() -> None:
    seen: set[type] = set()
    for run in RUNS:
        for usage in (True, False):
            seen |= check_frames(frames(run, ChatStream("m", include_usage=usage)), chat_wire.STREAM_EVENTS)
    assert seen == set(chat_wire.STREAM_EVENTS)


@pytest.mark.parametrize("run", RUNS[:4])
def test_the_chat_completion_object_roundtrips(run: list[Event]) -> None:
    obj = completion_object(completion(*run), "m")
    assert isinstance(obj, chat_wire.ChatCompletion)
    roundtrips(obj)


# -- Anthropic Messages ---------------------------------------------------------------------------


def test_every_messages_event_is_an_event_struct() -> None:
    seen: set[type] = set()
    for run in RUNS:
        seen |= check_frames(frames(run, MessagesStream("m", request_id="req_1")), anthropic_wire.STREAM_EVENTS)
    keepalive = MessagesStream("m", request_id="req_1").keepalive()
    seen |= check_frames([keepalive], anthropic_wire.STREAM_EVENTS)
    assert seen == set(anthropic_wire.STREAM_EVENTS)


@pytest.mark.parametrize("run", RUNS[:4])
def test_the_message_object_roundtrips(run: list[Event]) -> None:
    obj = message_object(completion(*run), "m")
    assert isinstance(obj, anthropic_wire.Message)
    roundtrips(obj)


# -- Responses ------------------------------------------------------------------------------------


def test_every_responses_event_is_an_event_struct() -> None:
    seen: set[type] = set()
    for run in RUNS:
        seen |= check_frames(frames(run, responses_stream()), responses_events.STREAM_EVENTS)
    seen |= check_frames([responses_stream().keepalive()], responses_events.STREAM_EVENTS)
    seen |= check_frames(frames(RUNS[0], responses_stream(queued=True)), responses_events.STREAM_EVENTS)
    assert seen == set(responses_events.STREAM_EVENTS)


@pytest.mark.parametrize("run", RUNS[:4])
def test_the_response_object_roundtrips(run: list[Event]) -> None:
    obj = responses_stream().object(completion(*run))
    assert isinstance(obj, responses_wire.Response)
    roundtrips(obj)


def test_a_whole_turn_and_the_compaction_answer_roundtrip() -> None:
    result = CompactionResult("the note", "summary", 3, 100, "m", USAGE, 1)
    answer = compaction_object(result, "be brief")
    assert [type(item) for item in answer.output] == [responses_wire.MessageItem, responses_wire.CompactionItem]
    roundtrips(answer)
    builder = responses_stream().builder
    events = [*builder.start(), *builder.completed([answer.output[1]], USAGE)]
    for event in events:
        assert isinstance(event, responses_events.STREAM_EVENTS)
        roundtrips(event)


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_the_error_envelopes_are_structs(exc: TinyTitanError) -> None:
    roundtrips(openai_error(exc)[1])
    roundtrips(anthropic_error(exc, "req_1")[1])
    roundtrips(socket_error(exc))
