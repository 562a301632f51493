"""The Responses keepalive is an event a client counts (issue 29 item 1): while the first token is
late, a repeated ``response.in_progress`` (next sequence number) goes out — never an SSE comment,
which Codex's parser drops without resetting its idle timer. The strict validator and the official
SDK read the same stream, several streams at once (the later ones wait in the queue, announced by
``response.queued``). A keepalive's snapshot is small and current (issue 36 item 4): the output as
written so far, without the request's large echoes (instructions, tools).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from tinytitan.api.responses.encode import OutputBuilder, ResponsesStream, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.engine.events import Finished, TextDelta
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import Sampling
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.events import as_sent
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server, slot_held

KEEPALIVE = 0.2
REPLY = "a slow but whole answer"


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    slow = {"reply": {"reasoning": "Let me think.", "text": REPLY, "prefill_ms": 900, "chunk_size": 3}}
    settings = Settings(keepalive_seconds=KEEPALIVE, queue_limit=4)
    with live_server(StubBackend(script(slow)), settings=settings) as server:
        yield server


def raw_events(live: LiveServer) -> tuple[bytes, list[dict[str, Any]]]:
    body = {"model": STUB_MODEL, "input": "hi", "stream": True}
    with httpx.stream("POST", live.v1 + "/responses", json=body, timeout=60) as response:
        assert response.status_code == 200
        raw = response.read()
    events = sse.events(raw)
    assert all(name == data["type"] for name, data in events)
    return raw, [data for _, data in events]


def test_keepalives_are_in_progress_events_the_validator_accepts(live: LiveServer) -> None:
    raw, events = raw_events(live)
    assert b": ping" not in raw  # no comment line: every keepalive is an event
    final = check_stream(events)
    assert final["status"] == "completed"
    first_delta = next(i for i, e in enumerate(events) if e["type"].endswith(".delta"))
    before = [e["type"] for e in events[:first_delta]]
    assert before[:2] == ["response.created", "response.in_progress"]
    assert before.count("response.in_progress") >= 3, before  # the keepalives, before any output
    repeated = [e for e in events[:first_delta] if e["type"] == "response.in_progress"][-1]
    assert repeated["response"]["id"] == final["id"] and repeated["response"]["output"] == []


def test_sdk_and_validator_read_concurrent_slow_streams(live: LiveServer) -> None:
    """Two raw streams checked strictly and two SDK streams, at once: the later ones wait in the queue."""
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)

    def sdk() -> str:
        with client.responses.stream(model=STUB_MODEL, input="hi") as stream:
            seen = [event.type for event in stream]
            final = stream.get_final_response()
        assert seen.count("response.in_progress") >= 2
        return final.output_text

    def strict() -> str:
        final = check_stream(raw_events(live)[1])
        return str(final["output"][-1]["content"][0]["text"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(read) for read in (sdk, strict, sdk, strict)]
        answers = [f.result(timeout=120) for f in futures]
    assert answers == [REPLY] * 4


def test_the_keepalive_numbers_itself_after_the_last_event() -> None:
    """Pure encoder: a keepalive between two events takes the next sequence number."""
    shell = response_shell(ResponsesRequest(model=STUB_MODEL), model=STUB_MODEL, sampling=Sampling(), store=False)
    stream = ResponsesStream(OutputBuilder(shell), lambda _r: None)
    frames = [*stream.start(), stream.keepalive(), *stream.feed(TextDelta("hi")), stream.keepalive()]
    frames += stream.feed(Finished("stop"))
    events = [as_sent(f.data) for f in frames]
    assert [f.event for f in frames] == [e["type"] for e in events]
    assert check_stream(events)["output"][0]["content"][0]["text"] == "hi"
    assert events[2]["type"] == events[6]["type"] == "response.in_progress"
    assert events[6]["response"]["output"][0]["type"] == "message"  # the snapshot as it stands


def _stream(waiting: list[bool], **request: object) -> ResponsesStream:
    wire = ResponsesRequest(model=STUB_MODEL, **request)  # type: ignore[arg-type]
    shell = response_shell(wire, model=STUB_MODEL, sampling=Sampling(0.6, 0.95), store=False)
    return ResponsesStream(OutputBuilder(shell, waiting=lambda: waiting[0]), lambda _r: None)


def test_a_keepalive_carries_a_small_snapshot_with_the_text_written_so_far() -> None:
    """With Codex-sized instructions and tools the created event is ~65 KB; a keepalive is not: it
    carries what the schema requires and the open message with its text to date."""
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "d" * 2000, "parameters": {"type": "object"}}
        for i in range(20)
    ]
    stream = _stream([False], instructions="x" * 20_000, tools=tools)
    frames = [*stream.start(), *stream.feed(TextDelta("Hel")), stream.keepalive(), *stream.feed(TextDelta("lo"))]
    frames += [stream.keepalive(), *stream.feed(Finished("stop"))]
    events = [as_sent(f.data) for f in frames]
    assert check_stream(events)["output"][0]["content"][0]["text"] == "Hello"
    keepalives = [e for n, e in enumerate(events) if n > 1 and e["type"] == "response.in_progress"]
    assert len(json.dumps(events[0])) > 60_000
    for keepalive, written in zip(keepalives, ["Hel", "Hello"], strict=True):
        assert len(json.dumps(keepalive)) < 2_000
        snapshot = keepalive["response"]
        assert snapshot["instructions"] is None and snapshot["tools"] == []
        (item,) = snapshot["output"]
        assert (item["status"], item["content"][0]["text"]) == ("in_progress", written)
    final = events[-1]["response"]
    assert final["instructions"] == "x" * 20_000 and len(final["tools"]) == 20  # the terminal event echoes all


def test_a_request_waiting_for_a_slot_is_queued_then_in_progress() -> None:
    waiting = [True]
    stream = _stream(waiting)
    frames = [*stream.start(), stream.keepalive()]
    waiting[0] = False  # its slot came: the next keepalive says it runs
    frames += [stream.keepalive(), stream.keepalive(), *stream.feed(TextDelta("hi")), *stream.feed(Finished("stop"))]
    events = [as_sent(f.data) for f in frames]
    check_stream(events)
    kinds = [e["type"] for e in events]
    assert kinds[:5] == [
        "response.created",
        "response.queued",
        "response.queued",
        "response.in_progress",
        "response.in_progress",
    ]
    assert [e["response"]["status"] for e in events[:4]] == ["queued", "queued", "queued", "in_progress"]
    # no slot-change seen by a keepalive: the first output event announces that it runs
    stream = _stream([True])
    frames = [*stream.start()]
    events = [as_sent(f.data) for f in [*frames, *stream.feed(TextDelta("hi")), *stream.feed(Finished("stop"))]]
    check_stream(events)
    assert [e["type"] for e in events[:4]] == [
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_item.added",
    ]


def test_a_stream_behind_another_is_queued_on_the_wire(live: LiveServer) -> None:
    """The slot is held by a ticket of the test's own (deterministic: no race with a real generation)
    until the stream has said ``response.queued``; then it runs, and says so before any output."""
    body = {"model": STUB_MODEL, "input": "hi", "stream": True}
    with slot_held(live) as release, httpx.stream("POST", live.v1 + "/responses", json=body, timeout=60) as response:
        lines = response.iter_lines()
        head: list[str] = []
        while len(sse.events(head)) < 2:
            head.append(next(lines))
        release()
        events = [data for _, data in sse.events([*head, *lines])]
    check_stream(events)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.queued"] and events[0]["response"]["status"] == "queued"
    assert kinds.index("response.in_progress") < kinds.index("response.output_item.added")
