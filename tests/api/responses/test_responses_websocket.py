"""Responses over WebSocket (issue 29 item 2): the Open Responses WebSocket transport (2026-04-24)
and OpenAI's WebSocket-mode guide, against a real server. Each test names the rule it covers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import connect

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.websocket import open_socket

from .support import RULES

SLOW = {"when": {"user_contains": "slowly"}, "reply": {"text": "late but whole", "prefill_ms": 900}}
STUCK = {"when": {"user_contains": "forever"}, "reply": {"text": "never", "prefill_ms": 120_000}}


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    settings = Settings(keepalive_seconds=0.2, queue_limit=4, max_concurrent=1)
    with live_server(StubBackend(script(SLOW, STUCK, *RULES)), settings=settings) as server:
        yield server


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def last_request(live: LiveServer) -> dict[str, Any]:
    return live.recorded[-1]


def test_response_create_streams_every_event_as_one_text_frame(live: LiveServer) -> None:
    """Rule: the client sends ``response.create`` (the HTTP body; ``stream`` implicit); the server
    answers with the same semantic events as HTTP streaming, one JSON text frame each."""
    with open_socket(live.url) as ws:
        events = ws.run(model=STUB_MODEL, input="hi", stream=True)
    final = check_stream(events)
    assert final["status"] == "completed"
    assert final["output"][-1]["content"][0]["text"] == "hello from tinytitan"
    posted = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, "input": "hi"}, timeout=30).json()
    assert [item["type"] for item in posted["output"]] == [item["type"] for item in final["output"]]


def test_turns_run_sequentially_one_in_flight(live: LiveServer) -> None:
    """Rule: one response in flight per connection; turns are processed in order (a second
    ``response.create`` sent at once waits for the first to end)."""
    with open_socket(live.url) as ws:
        ws.create(model=STUB_MODEL, input="say it slowly", store=False)
        ws.create(model=STUB_MODEL, input="hi", store=False)
        first, second = ws.turn(), ws.turn()
    assert check_stream(first)["output"][-1]["content"][0]["text"] == "late but whole"
    assert check_stream(second)["output"][-1]["content"][0]["text"] == "hello from tinytitan"


def test_continuation_with_store_false_uses_the_connection_cache(live: LiveServer) -> None:
    """Rules: ``previous_response_id`` continuation with only the new items; ``store: false`` state is
    kept per connection (the server's store never holds it)."""
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input=[user("write the file")], store=False, tools=TOOLS))
        call = first["output"][-1]
        assert call["type"] == "function_call"
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "done"}
        second = check_stream(ws.run(model=STUB_MODEL, previous_response_id=first["id"], input=[output], store=False))
    assert second["output"][-1]["content"][0]["text"] == "The file is created."
    assert second["previous_response_id"] == first["id"]
    roles = [m["role"] for m in last_request(live)["messages"]]
    assert roles == ["user", "assistant", "tool"]  # the whole conversation reached the engine
    assert httpx.get(f"{live.v1}/responses/{first['id']}", timeout=10).status_code == 404  # never stored


def test_warm_up_with_generate_false_then_continue(live: LiveServer) -> None:
    """Rule (OpenAI guide): ``generate: false`` prepares state without output; its id chains."""
    with open_socket(live.url) as ws:
        recorded = len(live.recorded)
        warm = check_stream(ws.run(model=STUB_MODEL, input="You are terse.", generate=False, store=False))
        assert warm["status"] == "completed" and warm["output"] == []
        assert len(live.recorded) == recorded  # nothing ran
        turn = check_stream(ws.run(model=STUB_MODEL, previous_response_id=warm["id"], input="hi", store=False))
    assert turn["status"] == "completed"
    assert [m["content"] for m in last_request(live)["messages"]][:2] == ["You are terse.", "hi"]


def test_after_a_reconnect_store_false_is_gone_and_stored_responses_remain(live: LiveServer) -> None:
    """Rules: reconnect recovery — a ``store: false`` response is not found on a new connection
    (``previous_response_not_found``, so the client resends the full input); a stored one is."""
    with open_socket(live.url) as ws:
        private = check_stream(ws.run(model=STUB_MODEL, input="hi", store=False))
        stored = check_stream(ws.run(model=STUB_MODEL, input="hi", store=True))
    with open_socket(live.url) as ws:
        (error,) = ws.run(model=STUB_MODEL, previous_response_id=private["id"], input="again")
        again = check_stream(ws.run(model=STUB_MODEL, previous_response_id=stored["id"], input="again"))
        recovered = check_stream(ws.run(model=STUB_MODEL, input=[user("hi"), user("again")], store=False))
    assert error["type"] == "error" and error["status"] == 400
    assert error["error"]["code"] == "previous_response_not_found"
    assert error["error"]["param"] == "previous_response_id" and private["id"] in error["error"]["message"]
    assert again["status"] == recovered["status"] == "completed"


def test_a_failed_continuation_evicts_what_it_continued_from(live: LiveServer) -> None:
    """Rule: a continuation that fails (a 4xx here) evicts the connection-local response it named."""
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input="hi", store=False))
        (refused,) = ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="x", temperature=9)
        (gone,) = ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="again")
    assert refused["type"] == "error" and refused["error"]["param"] == "temperature"
    assert gone["error"]["code"] == "previous_response_not_found"


def test_a_compacted_window_starts_a_new_chain(live: LiveServer) -> None:
    """Rule: after ``POST /v1/responses/compact``, a new chain on a socket starts from its output
    items as input (no ``previous_response_id``), and continues from there."""
    conversation = [user("Store users somewhere simple."), {"role": "assistant", "content": "Using sqlite."}]
    body = {"model": STUB_MODEL, "input": conversation}
    compacted = httpx.post(live.v1 + "/responses/compact", json=body, timeout=60).json()
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input=[*compacted["output"], user("next?")], store=False))
        second = check_stream(ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="and then?"))
    assert first["status"] == second["status"] == "completed"
    request = last_request(live)
    assert "compacted" in request["system"]  # the note, from the item the chain started with
    assert [m["content"] for m in request["messages"] if m["role"] == "user"] == ["next?", "and then?"]


@pytest.mark.parametrize(
    ("event", "param", "code"),
    [
        ("not json", None, "invalid_json"),
        ({"type": "response.cancel"}, "type", "invalid_value"),
        ({"type": "response.create", "input": "hi"}, "model", "invalid_value"),
        ({"type": "response.create", "model": STUB_MODEL, "input": "hi", "stream_id": "a"}, "stream_id", None),
        ({"type": "response.create", "model": STUB_MODEL, "input": "hi", "background": True}, "background", None),
        ({"type": "response.create", "model": STUB_MODEL, "input": 7}, "input", "invalid_json"),
        ({"type": "response.create", "model": "gpt-4o", "input": "hi"}, "model", "model_not_found"),
    ],
)
def test_errors_are_structured_events_and_the_connection_stays_usable(
    live: LiveServer, event: Any, param: str | None, code: str | None
) -> None:
    """Rule: structured error events (type ``error``, the HTTP status, the OpenAI error object)."""
    with open_socket(live.url) as ws:
        if isinstance(event, str):
            ws.connection.send(event)
        else:
            ws.send(event)
        error = ws.event()
        after = check_stream(ws.run(model=STUB_MODEL, input="hi"))
    assert error["type"] == "error" and error["status"] in (400, 404)
    assert error["error"]["type"] == "invalid_request_error" and error["error"]["message"]
    assert error["error"].get("param") == param
    if code is not None:
        assert error["error"]["code"] == code
    assert after["status"] == "completed"


def test_a_generation_that_fails_ends_with_response_failed(live: LiveServer) -> None:
    with open_socket(live.url) as ws:
        events = ws.run(model=STUB_MODEL, input="explode")
    assert check_stream(events)["error"]["code"] == "server_error"


def test_keepalives_flow_as_frames_while_the_first_token_is_late(live: LiveServer) -> None:
    """Codex's idle timer applies to WebSocket frames too: the keepalive is a parsed event here as well."""
    with open_socket(live.url) as ws:
        events = ws.run(model=STUB_MODEL, input="say it slowly")
    check_stream(events)
    first_delta = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
    assert [e["type"] for e in events[:first_delta]].count("response.in_progress") >= 3


def test_concurrent_sockets_wait_in_the_queue_with_keepalives(live: LiveServer) -> None:
    """Three connections at once on one slot, each first token late: two wait in the queue, all
    keep receiving keepalive events, all finish with a valid stream."""

    def session(_: int) -> list[dict[str, Any]]:
        with open_socket(live.url) as ws:
            return ws.run(model=STUB_MODEL, input="say it slowly", store=False)

    with ThreadPoolExecutor(3) as pool:
        streams = list(pool.map(session, range(3)))
    for events in streams:
        assert check_stream(events)["output"][-1]["content"][0]["text"] == "late but whole"
        assert [e["type"] for e in events].count("response.in_progress") >= 3


def test_a_client_gone_mid_generation_frees_its_slot(live: LiveServer) -> None:
    """One slot (max_concurrent 1): a socket closed while its turn waits for a first token two
    minutes away must free it — the next request is answered, not queued behind it."""
    with open_socket(live.url) as ws:
        ws.create(model=STUB_MODEL, input="wait forever")
        assert ws.event()["type"] == "response.created"
    answer = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, "input": "hi"}, timeout=60)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"


def test_the_connection_lifetime_is_bounded() -> None:
    """Rule: a bounded connection age (60 minutes by default): then ``websocket_connection_limit_reached``
    and a normal close, which Codex and the SDK answer by reconnecting."""
    settings = Settings(websocket_max_age=1.0)
    with live_server(StubBackend(script(*RULES)), settings=settings) as server, open_socket(server.url) as ws:
        assert check_stream(ws.run(model=STUB_MODEL, input="hi"))["status"] == "completed"
        error = ws.event(timeout=30)
        with pytest.raises(ConnectionClosedOK):
            ws.event(timeout=30)
    assert error["type"] == "error" and error["error"]["code"] == "websocket_connection_limit_reached"
    assert ws.connection.close_code == 1000


# -- the upgrade: the HTTP guard, and the switch -----------------------------------------------


def refusal(
    url: str, path: str = "/v1/responses", headers: dict[str, str] | None = None, host: str | None = None
) -> tuple[int, Any]:
    """The status and JSON body of a refused upgrade (``host``: the Host header, the socket still to ``url``)."""
    address = url.removeprefix("http://")
    name, port = address.rsplit(":", 1)
    with pytest.raises(InvalidStatus) as refused, socket.create_connection((name, int(port))) as sock:
        connect(f"ws://{host or address}{path}", additional_headers=headers, sock=sock).close()
    response = refused.value.response
    return response.status_code, json.loads(response.body or b"{}")


def test_the_upgrade_passes_the_host_and_origin_guard(live: LiveServer) -> None:
    """Rule: the same Host / Origin guard as HTTP (a web page cannot open the socket)."""
    status, body = refusal(live.url, headers={"Origin": "https://evil.example"})
    assert status == 403 and "origin" in body["error"]["message"]
    status, body = refusal(live.url, host="attacker.example")
    assert status == 403 and body["error"]["message"] == "host not allowed"
    with open_socket(live.url, headers={"Origin": f"http://localhost:{live.port}"}) as ws:
        assert check_stream(ws.run(model=STUB_MODEL, input="hi"))["status"] == "completed"


def test_the_upgrade_needs_the_api_key_when_one_is_set() -> None:
    """Rule: the same auth as HTTP (``--api-key``: Bearer or x-api-key at the upgrade)."""
    settings = Settings(api_key="sekrit")
    with live_server(StubBackend(script(*RULES)), settings=settings) as server:
        status, body = refusal(server.url)
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        assert refusal(server.url, headers={"Authorization": "Bearer wrong"})[0] == 401
        with open_socket(server.url, headers={"Authorization": "Bearer sekrit"}) as ws:
            assert check_stream(ws.run(model=STUB_MODEL, input="hi"))["status"] == "completed"


def test_websocket_mode_off_answers_426_and_http_still_works() -> None:
    """``serve --no-websockets``: the upgrade gets 426 (Codex falls back to HTTP on exactly that)."""
    with live_server(StubBackend(script(*RULES)), settings=Settings(websockets=False)) as server:
        status, body = refusal(server.url)
        assert status == 426 and body["error"]["code"] == "websockets_disabled"
        assert "--no-websockets" in body["error"]["message"]
        posted = httpx.post(server.v1 + "/responses", json={"model": STUB_MODEL, "input": "hi"}, timeout=30)
        assert posted.status_code == 200


def test_only_the_responses_path_upgrades(live: LiveServer) -> None:
    status, body = refusal(live.url, path="/v1/chat/completions")
    assert status == 404 and "/v1/responses" in body["error"]["message"]


def test_a_plain_get_is_still_refused_with_405(live: LiveServer) -> None:
    assert httpx.get(live.v1 + "/responses", timeout=10).status_code == 405


# -- the official SDK's WebSocket client -------------------------------------------------------


def test_the_openai_sdk_websocket_client_runs_a_tool_session(live: LiveServer) -> None:
    """``client.responses.connect()``: a tool call, then the continuation with its output."""
    import openai

    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    with client.responses.connect() as connection:
        connection.response.create(model=STUB_MODEL, input="write the file", tools=TOOLS, store=False)
        first = _sdk_turn(connection)
        call = first.output[-1]
        assert call.type == "function_call"
        output: Any = {"type": "function_call_output", "call_id": call.call_id, "output": "ok"}
        connection.response.create(model=STUB_MODEL, previous_response_id=first.id, input=[output], store=False)
        second = _sdk_turn(connection)
    assert second.output_text == "The file is created."


def _sdk_turn(connection: Any) -> Any:
    for event in connection:
        assert event.type != "error", event
        if event.type == "response.completed":
            return event.response
    raise AssertionError("the connection closed before response.completed")


TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "Write",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["file_path", "content"],
        },
    }
]
