"""In-band compaction (issue 29 item 3): ``{"type": "compaction_trigger"}`` as the last input item of
``POST /v1/responses`` (or a WebSocket ``response.create``) compacts the conversation through the
machinery of ``/v1/responses/compact`` and answers with exactly one ``compaction`` output item."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.passes.compaction import HANDOVER_ASK, HANDOVER_INSTRUCTION
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.websocket import open_socket
from tinytitan.testing.wire_schemas import check_open_responses

NOTE = "Decisions:\n- chose sqlite over postgres (no server)\nNext step:\n- add the migration in db/001.sql"
TRIGGER = {"type": "compaction_trigger"}
CONVERSATION: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": "base prompt"},
    {"type": "message", "role": "user", "content": "Store users somewhere simple."},
    {"type": "message", "role": "assistant", "content": "Using sqlite."},
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    rules: list[dict[str, Any]] = [
        {"when": {"user_contains": HANDOVER_ASK, "has_tools": True}, "reply": {"text": "1 2", "fail_after_events": 1}},
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE, "prefill_ms": 700}},
        {"reply": {"text": "continuing"}},
    ]
    with live_server(StubBackend(script(*rules)), settings=Settings(keepalive_seconds=0.2)) as server:
        yield server


def summary(item: dict[str, Any]) -> str:
    return str(json.loads(base64.b64decode(item["encrypted_content"]))["summary"])


def post_stream(live: LiveServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", live.v1 + "/responses", json={"model": STUB_MODEL, "stream": True, **body}) as r:
        assert r.status_code == 200
        return [data for _, data in sse.events(r.read())]


def test_a_streamed_trigger_answers_with_exactly_one_compaction_item(live: LiveServer) -> None:
    before = len(live.recorded)
    events = post_stream(live, {"input": [*CONVERSATION, TRIGGER], "store": False, "tools": []})
    final = check_stream(events)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction"] and final["output"] == done
    assert summary(done[0]) == NOTE and final["status"] == "completed"
    assert final["usage"]["input_tokens"] > 0 and final["usage"]["output_tokens"] > 0
    # the compaction machinery ran (its handover pass, the conversation read as the model read it), nothing else
    (compaction_pass,) = live.recorded[before:]
    assert compaction_pass["system"] == "base prompt"
    *session, ask = compaction_pass["messages"]
    assert [m["content"] for m in session] == ["Store users somewhere simple.", "Using sqlite."]
    assert ask == {**ask, "role": "user", "content": f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"}
    # the pass waited 0.7 s for its first token: the stream kept itself alive meanwhile
    assert [e["type"] for e in events].count("response.in_progress") >= 3


def test_a_plain_trigger_request_returns_the_object(live: LiveServer) -> None:
    body = {"model": STUB_MODEL, "input": [*CONVERSATION, TRIGGER]}
    response = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
    check_open_responses(response, "ResponseResource")  # top_p a number: the pass is greedy, not null
    assert response["object"] == "response" and response["status"] == "completed"
    (item,) = response["output"]
    assert item["type"] == "compaction" and item["id"].startswith("cmp_") and summary(item) == NOTE


def test_the_compaction_item_continues_the_session(live: LiveServer) -> None:
    """What Codex does next: the item (and new input) as the start of the next request."""
    stored = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, "input": CONVERSATION}, timeout=60).json()
    body = {"model": STUB_MODEL, "previous_response_id": stored["id"], "input": [TRIGGER]}
    compacted = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
    (item,) = compacted["output"]
    body = {"model": STUB_MODEL, "input": [item, {"role": "user", "content": "next?"}], "instructions": "Be brief."}
    follow = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
    assert follow["output"][-1]["content"][0]["text"] == "continuing"
    system = live.recorded[-1]["system"]
    assert system.startswith("Be brief.\n\n") and system.endswith(NOTE)
    assert [m["content"] for m in live.recorded[-1]["messages"]] == ["next?"]


def test_over_the_websocket_the_compacted_response_is_the_new_base(live: LiveServer) -> None:
    """Over the socket (Codex with provider "OpenAI" and WebSockets): continue from a ``store: false``
    turn, compact it in band, then continue from the compaction response — the note alone."""
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input=CONVERSATION, store=False))
        compacted = check_stream(ws.run(model=STUB_MODEL, previous_response_id=first["id"], input=[TRIGGER]))
        assert [item["type"] for item in compacted["output"]] == ["compaction"]
        assert summary(compacted["output"][0]) == NOTE
        after = check_stream(ws.run(model=STUB_MODEL, previous_response_id=compacted["id"], input="next?"))
    assert after["output"][-1]["content"][0]["text"] == "continuing"
    assert live.recorded[-1]["system"].endswith(NOTE)
    assert [m["content"] for m in live.recorded[-1]["messages"]] == ["next?"]


def test_a_compaction_that_fails_ends_with_response_failed(live: LiveServer) -> None:
    tools = [{"type": "function", "name": "explode", "parameters": {"type": "object", "properties": {}}}]
    events = post_stream(live, {"input": [*CONVERSATION, TRIGGER], "tools": tools})
    final = check_stream(events)
    assert final["status"] == "failed" and final["error"]["code"] == "server_error"


def test_a_warm_up_that_ends_with_a_trigger_runs_no_model_pass(live: LiveServer) -> None:
    """Issue 40.4: ``generate: false`` checks and remembers the conversation; nothing runs."""
    before = len(live.recorded)
    with open_socket(live.url) as ws:
        warm = check_stream(ws.run(model=STUB_MODEL, input=[*CONVERSATION, TRIGGER], generate=False, store=False))
        assert warm["status"] == "completed" and warm["output"] == []
        after = check_stream(ws.run(model=STUB_MODEL, previous_response_id=warm["id"], input="next?"))
    assert after["output"][-1]["content"][0]["text"] == "continuing"
    (turn,) = live.recorded[before:]  # the turn after the warm-up is the only model pass
    assert [m["content"] for m in turn["messages"]] == ["Store users somewhere simple.", "Using sqlite.", "next?"]


@pytest.mark.parametrize(
    ("items", "param", "message"),
    [
        ([TRIGGER, *CONVERSATION], "input[0].type", "must be the last input item"),
        ([CONVERSATION[0], TRIGGER], "input", "nothing to compact"),
    ],
)
def test_misplaced_or_empty_triggers_are_refused(live: LiveServer, items: Any, param: str, message: str) -> None:
    response = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, "input": items}, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"]
