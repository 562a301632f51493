"""OpenAI server-side compaction (issue 40.3): ``context_management: [{"type": "compaction",
"compact_threshold"}]`` on ``POST /v1/responses``, over HTTP and the WebSocket; every object and
event checked against the Open Responses schemas."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.passes.compaction import HANDOVER_ASK, HANDOVER_INSTRUCTION, summary_preamble
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.websocket import open_socket
from tinytitan.testing.wire_schemas import check_open_responses

NOTE = "The user: Dana.\nDecisions:\n- sqlite over postgres (no server)\nNext step:\n- write db/001.sql"
MANAGED = [{"type": "compaction", "compact_threshold": 40}]
SESSION: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": "base prompt"},
    {"type": "message", "role": "user", "content": "I'm Dana. Store users somewhere simple. " + "Detail. " * 40},
    {"type": "message", "role": "assistant", "content": "Using sqlite."},
    {"type": "message", "role": "user", "content": "Write the migration."},
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    rules: list[dict[str, Any]] = [
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE, "prefill_ms": 500}},
        {"when": {"user_contains": "compacted"}, "reply": {"text": "Writing db/001.sql."}},
        {"reply": {"text": "continuing"}},
    ]
    with live_server(StubBackend(script(*rules)), settings=Settings(keepalive_seconds=0.2)) as server:
        yield server


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(item["encrypted_content"])))


def test_past_the_threshold_the_response_carries_the_compaction_item_then_the_answer(live: LiveServer) -> None:
    before = len(live.recorded)
    body = {"model": STUB_MODEL, "input": SESSION, "context_management": MANAGED, "store": False}
    response = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
    check_open_responses(response, "ResponseResource")
    compaction, message = response["output"]
    assert compaction["type"] == "compaction" and compaction["id"].startswith("cmp_")
    payload = _summary(compaction)
    assert payload["summary"] == NOTE and payload["prunes"] is True and payload["read"] == "continuation"
    assert message["type"] == "message" and message["content"][0]["text"] == "Writing db/001.sql."
    # the pass read the session as the model reads it; the answer read the compacted window
    compacting, answering = live.recorded[before:]
    assert compacting["system"] == "base prompt"
    assert compacting["messages"][-1]["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
    assert answering["system"] == "base prompt"
    assert [(m["role"], m["content"]) for m in answering["messages"]] == [("user", summary_preamble(NOTE))]
    # usage is the whole cost: the passes and the answer
    assert response["usage"]["input_tokens"] > len(compacting["prompt"].split()) // 2
    assert response["usage"]["output_tokens"] >= 2


def test_streamed_the_item_comes_whole_first_and_the_stream_stays_alive(live: LiveServer) -> None:
    body = {"model": STUB_MODEL, "input": SESSION, "context_management": MANAGED, "stream": True}
    with httpx.stream("POST", live.v1 + "/responses", json=body, timeout=60) as r:
        events = [data for _, data in sse.events(r.read())]
    final = check_stream(events)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction", "message"] and final["output"] == done
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert added[0]["output_index"] == 0 and added[0]["item"] == done[0]
    # the handover pass waited 0.5 s for its first token: keepalives came meanwhile
    assert [e["type"] for e in events].count("response.in_progress") >= 2


def test_the_next_turn_continues_from_the_item_however_the_client_chains(live: LiveServer) -> None:
    """Stateless chaining (the whole history again), history after the item only, or
    ``previous_response_id``: the same compacted window, and no compaction again."""
    first = httpx.post(
        live.v1 + "/responses", json={"model": STUB_MODEL, "input": SESSION, "context_management": MANAGED}, timeout=60
    ).json()
    nxt = {"type": "message", "role": "user", "content": "next?"}
    expected = [("user", summary_preamble(NOTE)), ("assistant", "Writing db/001.sql."), ("user", "next?")]
    bodies: list[tuple[dict[str, Any], str | None]] = [
        ({"input": [*SESSION, *first["output"], nxt]}, "base prompt"),
        ({"input": [*first["output"], nxt]}, None),  # the client dropped its developer message too
        ({"input": [nxt], "previous_response_id": first["id"]}, "base prompt"),
    ]
    for extra, system in bodies:
        before = len(live.recorded)
        body = {"model": STUB_MODEL, "context_management": [{"type": "compaction", "compact_threshold": 400}], **extra}
        response = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
        check_open_responses(response, "ResponseResource")
        assert [item["type"] for item in response["output"]] == ["message"]
        (turn,) = live.recorded[before:]
        assert turn["system"] == system
        assert [(m["role"], m["content"]) for m in turn["messages"]] == expected


def test_the_openai_sdk_sends_it_and_reads_the_item(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    session: Any = SESSION
    response = client.responses.create(
        model=STUB_MODEL, input=session, context_management=[{"type": "compaction", "compact_threshold": 40}]
    )
    compaction, message = response.output
    assert compaction.type == "compaction" and _summary(compaction.model_dump())["summary"] == NOTE
    assert message.type == "message"
    assert response.output_text == "Writing db/001.sql."
    with client.responses.stream(
        model=STUB_MODEL, input=session, context_management=[{"type": "compaction", "compact_threshold": 40}]
    ) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["compaction", "message"]


def test_over_the_websocket(live: LiveServer) -> None:
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input=SESSION, context_management=MANAGED, store=False))
        assert [item["type"] for item in first["output"]] == ["compaction", "message"]
        after = check_stream(ws.run(model=STUB_MODEL, previous_response_id=first["id"], input="next?"))
    assert after["output"][-1]["content"][0]["text"] == "continuing"
    assert [m["role"] for m in live.recorded[-1]["messages"]] == ["user", "assistant", "user"]


def test_under_the_threshold_nothing_is_compacted(live: LiveServer) -> None:
    before = len(live.recorded)
    body = {"model": STUB_MODEL, "input": SESSION, "context_management": [{"type": "compaction"}]}  # 80 % of 32k
    response = httpx.post(live.v1 + "/responses", json=body, timeout=60).json()
    assert [item["type"] for item in response["output"]] == ["message"] and len(live.recorded) == before + 1


@pytest.mark.parametrize(
    ("management", "param"),
    [
        ([{"type": "truncate"}], "context_management[0].type"),
        ([{"type": "compaction", "compact_threshold": 0}], "context_management[0].compact_threshold"),
        ([{"type": "compaction", "compact_threshold": "many"}], "context_management[0].compact_threshold"),
        ({"type": "compaction"}, "context_management"),
    ],
)
def test_what_the_api_does_not_define_is_refused_by_name(live: LiveServer, management: Any, param: str) -> None:
    body = {"model": STUB_MODEL, "input": SESSION, "context_management": management}
    refused = httpx.post(live.v1 + "/responses", json=body, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == param
