"""The Responses WebSocket's loose ends (issue 36 item 3), each against a real server: the workspace
header, eviction by a continuation refused before it decodes, the reader's refusals kept out of
another response's stream, a warm-up with only instructions and tools, a frame that is not UTF-8,
the 426's ``Upgrade`` header, and a connection age that is not a number. (Shutdown: ``tests/api/test_server.py``.)"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import connect

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings, SettingsError
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server, slot_held
from tinytitan.testing.waiting import wait_until
from tinytitan.testing.websocket import TURN_ENDS, open_socket

from .support import RULES

SLOW = {"when": {"user_contains": "slowly"}, "reply": {"text": "late but whole", "prefill_ms": 900}}
TOOL = {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    settings = Settings(keepalive_seconds=0.2, queue_limit=4)
    with live_server(StubBackend(script(SLOW, *RULES)), settings=settings) as server:
        yield server


def test_the_upgrades_workspace_header_scopes_memory_on_every_turn(tmp_path: Path) -> None:
    """``X-TinyTitan-Workspace`` on the upgrade request is the workspace of the connection's turns (it
    was ignored: memory then scoped to the launch directory)."""
    workspace = tmp_path / "proj-ws"
    settings = Settings(memory=True, memory_dir=str(tmp_path / "memory"), launch_dir=str(tmp_path / "launch"))
    with live_server(StubBackend(script(*RULES)), settings=settings) as server:
        with open_socket(server.url, headers={"X-TinyTitan-Workspace": str(workspace)}) as ws:
            assert check_stream(ws.run(model=STUB_MODEL, input="hi", store=False))["status"] == "completed"
        system = server.recorded[-1]["system"]
    assert str(workspace) in system and str(tmp_path / "launch") not in system


def test_a_continuation_refused_before_its_body_decodes_evicts_what_it_continued_from(live: LiveServer) -> None:
    """The transport's MUST: a failed continuation evicts the response it named — also when the body
    is refused before it decodes (a field of the wrong JSON type)."""
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input="hi", store=False))
        (refused,) = ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="x", max_output_tokens="many")
        (gone,) = ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="again")
    assert refused["type"] == "error" and refused["error"]["code"] == "invalid_json"
    assert gone["error"]["code"] == "previous_response_not_found"


def test_the_readers_refusals_wait_for_the_turn_in_flight(live: LiveServer) -> None:
    """A binary frame, and a ``response.create`` beyond the waiting limit, are refused in their turn:
    after the response in flight has ended, never inside its stream."""
    with open_socket(live.url) as ws:
        ws.create(model=STUB_MODEL, input="say it slowly", store=False)
        created = ws.event()
        assert created["type"] == "response.created"
        ws.connection.send(b"\x00binary")
        turn = [created, *ws.turn()]
        assert turn[-1]["type"] == "response.completed"
        check_stream(turn)  # no error among its events
        refused = ws.event()
        assert refused["type"] == "error" and "binary" in refused["error"]["message"]
        assert check_stream(ws.run(model=STUB_MODEL, input="hi", store=False))["status"] == "completed"


def test_a_turn_beyond_the_waiting_limit_is_refused_in_its_turn(live: LiveServer) -> None:
    """The slot is held (a ticket of the test's own) so the first turn stays in flight while the
    others arrive: MAX_WAITING wait, the next is refused — after the turns before it, in order."""
    from tinytitan.api.responses.websocket import MAX_WAITING

    sessions = live.sessions
    assert sessions is not None
    with slot_held(live) as release, open_socket(live.url) as ws:
        ws.create(model=STUB_MODEL, input="hi", store=False)
        assert ws.event()["type"] == "response.created"  # in flight: waiting for the slot
        for _ in range(MAX_WAITING + 1):
            ws.create(model=STUB_MODEL, input="hi", store=False)
        wait_until(lambda: any(s.inbox.qsize() == MAX_WAITING + 1 for s in sessions.open), what="all read")
        release()
        ends = [ws.turn()[-1] for _ in range(MAX_WAITING + 2)]
    assert [end["type"] for end in ends] == ["response.completed"] * (MAX_WAITING + 1) + ["error"]
    assert ends[-1]["error"]["code"] == "queue_full"


def test_a_warm_up_may_send_only_instructions_and_tools(live: LiveServer) -> None:
    """OpenAI's documented warm-up: ``generate: false`` with instructions and tools, no input."""
    with open_socket(live.url) as ws:
        recorded = len(live.recorded)
        events = ws.run(model=STUB_MODEL, instructions="You are terse.", tools=[TOOL], generate=False, store=False)
        warm = check_stream(events)
        assert len(live.recorded) == recorded  # nothing ran
        turn = check_stream(ws.run(model=STUB_MODEL, previous_response_id=warm["id"], input="hi", store=False))
    assert (warm["status"], warm["output"], warm["instructions"]) == ("completed", [], "You are terse.")
    assert turn["status"] == "completed"


def test_a_warm_up_is_still_checked_like_a_generation(live: LiveServer) -> None:
    with open_socket(live.url) as ws:
        (refused,) = ws.run(model=STUB_MODEL, tools=[{"type": "function", "name": "bad name"}], generate=False)
    assert refused["type"] == "error" and refused["error"]["param"] == "tools[0].name"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_frame_that_is_not_utf8_closes_with_1007_and_one_log_line(live: LiveServer) -> None:
    records = _Records()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(records)
    try:
        with open_socket(live.url) as ws:
            ws.connection.send(b'{"type": "response.create", "input": "\xff"}', text=True)
            with pytest.raises(ConnectionClosedError):
                ws.connection.recv(timeout=30)
        assert ws.connection.close_code == 1007
    finally:
        logger.removeHandler(records)
    (line,) = [r for r in records.records if "UTF-8" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert line.getMessage() == "a WebSocket client sent a text frame that is not UTF-8; closed it with 1007"


def test_the_426_names_the_protocol_in_its_upgrade_header() -> None:
    """RFC 9110: a 426 says in ``Upgrade`` which protocol it is about."""
    with live_server(StubBackend(script(*RULES)), settings=Settings(websockets=False)) as server:
        name, port = server.url.removeprefix("http://").rsplit(":", 1)
        with pytest.raises(InvalidStatus) as refused, socket.create_connection((name, int(port))) as sock:
            connect(f"ws://{name}:{port}/v1/responses", sock=sock).close()
    response = refused.value.response
    assert response.status_code == 426 and response.headers["upgrade"] == "websocket"


@pytest.mark.parametrize("age", [float("nan"), float("inf"), 0.0, -1.0])
def test_a_connection_age_that_is_not_a_positive_finite_number_is_refused(age: float) -> None:
    """``--websocket-max-age nan`` was accepted — and closed every connection at once."""
    with pytest.raises(SettingsError, match="--websocket-max-age"):
        Settings(websocket_max_age=age).check()


def test_every_frame_of_a_session_is_valid_against_the_schema(live: LiveServer) -> None:
    """The test client checks each frame it reads (``tinytitan.testing.websocket``): a stream event,
    keepalives included, or the transport's error event."""
    with open_socket(live.url) as ws:
        events: list[dict[str, Any]] = ws.run(model=STUB_MODEL, input="say it slowly", store=False)
        (error,) = ws.run(model=STUB_MODEL, previous_response_id="resp_missing", input="x")
    assert events[-1]["type"] in TURN_ENDS and [e["type"] for e in events].count("response.in_progress") >= 2
    assert error["type"] == "error" and error["status"] == 400
