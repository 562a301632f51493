"""The Responses keepalive is an event a client counts (issue 29 item 1): while the first token is
late, a repeated ``response.in_progress`` (current snapshot, next sequence number) goes out — never
an SSE comment, which Codex's parser drops without resetting its idle timer. The strict validator
and the official SDK read the same stream, several streams at once (the later ones wait in the queue).
"""

from __future__ import annotations

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
from tinytitan.testing.server import LiveServer, live_server

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
