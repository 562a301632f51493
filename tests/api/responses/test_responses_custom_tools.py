"""Custom (freeform) tools on the Responses API (issue 38 item 1): the tool, its ``custom_tool_call``
output item and ``response.custom_tool_call_input.*`` events, the items read back on the next turn
(input, ``previous_response_id``, ``/input_items``, the WebSocket), the custom and ``allowed_tools``
tool choices, and the refusals that name ``tools[i].format``. Every stream is checked event by event
(``check_stream``) and every object against the schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing import sse
from tinytitan.testing.freeform import APPLY_PATCH, PATCH, custom_tool, grammar
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.websocket import open_socket
from tinytitan.testing.wire_schemas import check_open_responses

EXEC = custom_tool("exec")  # free text
CODE = 'const r = await tools.exec_command({ cmd: "ls" });\ntext(r);\n'
RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": "apply_patch"}, "reply": {"text": "Patched."}},
    {
        "when": {"user_contains": "patch"},
        "reply": {"text": "", "tool_calls": [{"name": "apply_patch", "input": PATCH}]},
    },
    {"when": {"user_contains": "run"}, "reply": {"tool_calls": [{"name": "exec", "input": CODE}]}},
    {"when": {"user_contains": "broken"}, "reply": {"tool_calls": [{"name": "apply_patch", "input": "not a patch"}]}},
    {"reply": {"text": "plain"}},
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES, forced_tool_calls=True))) as server:
        yield server


def create(live: LiveServer, **body: Any) -> httpx.Response:
    return httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, **body}, timeout=60)


def stream(live: LiveServer, **body: Any) -> list[dict[str, Any]]:
    with httpx.stream("POST", live.v1 + "/responses", json={"model": STUB_MODEL, "stream": True, **body}) as r:
        assert r.status_code == 200, r.read()
        return [data for _, data in sse.events(r.read())]


def test_a_custom_tool_call_streams_as_a_custom_tool_call_item(live: LiveServer) -> None:
    events = stream(live, input="patch it", tools=[APPLY_PATCH, EXEC])
    final = check_stream(events)  # every event against the schema of its type, the grammar of the stream
    kinds = [e["type"] for e in events]
    assert "response.custom_tool_call_input.delta" in kinds and "response.custom_tool_call_input.done" in kinds
    (call,) = final["output"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch" and call["input"] == PATCH
    assert call["id"].startswith("ctc_") and call["call_id"] and call["status"] == "completed"
    (done,) = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == PATCH and done["item_id"] == call["id"]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta")
    assert deltas == PATCH
    assert final["tools"][0] == APPLY_PATCH  # echoed as sent
    # the engine saw a custom tool with its grammar, not a function
    recorded = live.recorded[-1]["tools"]
    assert recorded[0]["type"] == "custom" and recorded[0]["format"]["definition"] == grammar("codex_apply_patch")


def test_the_object_and_the_sdk(live: LiveServer) -> None:
    from openai import OpenAI

    body = create(live, input="patch it", tools=[APPLY_PATCH]).json()
    check_open_responses(body, "ResponseResource")
    client = OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    response = client.responses.create(model=STUB_MODEL, input="patch it", tools=[APPLY_PATCH])  # type: ignore[list-item]
    (call,) = response.output
    assert call.type == "custom_tool_call" and call.input == PATCH and call.name == "apply_patch"
    with client.responses.stream(model=STUB_MODEL, input="run it", tools=[EXEC]) as events:  # type: ignore[list-item]
        seen = [e.type for e in events]
        final = events.get_final_response()
    assert "response.custom_tool_call_input.done" in seen
    assert final.output[0].type == "custom_tool_call" and final.output[0].input == CODE


def test_the_call_and_its_output_are_read_back_through_previous_response_id(live: LiveServer) -> None:
    first = create(live, input="patch it", tools=[APPLY_PATCH]).json()
    call = first["output"][0]
    output = {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done!\nM src/app.py"}
    second = create(live, previous_response_id=first["id"], input=[output], tools=[APPLY_PATCH]).json()
    assert second["output"][-1]["content"][0]["text"] == "Patched."
    turns = live.recorded[-1]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "tool"]
    (sent,) = turns[1]["tool_calls"]
    assert sent == {"id": call["call_id"], "type": "custom", "name": "apply_patch", "arguments": PATCH}
    assert turns[2] == {
        "role": "tool",
        "content": "Done!\nM src/app.py",
        "tool_calls": [],
        "tool_call_id": call["call_id"],
    }
    listed = httpx.get(f"{live.v1}/responses/{second['id']}/input_items", timeout=10).json()
    check_open_responses(listed["data"][0], "ItemField")
    assert listed["data"][0]["type"] == "custom_tool_call_output" and listed["data"][0]["output"] == output["output"]
    assert listed["data"][0]["id"].startswith("ctco_")


def test_the_items_sent_back_as_input(live: LiveServer) -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "patch it"},
        {"type": "custom_tool_call", "call_id": "call_7", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_7", "output": [{"type": "input_text", "text": "ok"}]},
    ]
    body = create(live, input=items, tools=[APPLY_PATCH]).json()
    assert body["output"][-1]["content"][0]["text"] == "Patched."
    turns = live.recorded[-1]["messages"]
    assert turns[1]["tool_calls"] == [{"id": "call_7", "type": "custom", "name": "apply_patch", "arguments": PATCH}]
    assert turns[2]["content"] == "ok"
    bad = create(live, input=[{**items[1], "input": 3}, items[2]], tools=[APPLY_PATCH])
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[0].input"


def test_over_the_websocket(live: LiveServer) -> None:
    with open_socket(live.url) as ws:
        first = check_stream(ws.run(model=STUB_MODEL, input="patch it", tools=[APPLY_PATCH], store=False))
        call = first["output"][0]
        assert call["type"] == "custom_tool_call" and call["input"] == PATCH
        output = {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "ok"}
        second = check_stream(ws.run(model=STUB_MODEL, previous_response_id=first["id"], input=[output]))
    assert second["output"][-1]["content"][0]["text"] == "Patched."
    assert live.recorded[-1]["messages"][1]["tool_calls"][0]["type"] == "custom"


def test_a_custom_tool_choice_forces_that_tool(live: LiveServer) -> None:
    body = create(
        live, input="patch it", tools=[APPLY_PATCH, EXEC], tool_choice={"type": "custom", "name": "apply_patch"}
    )
    assert body.status_code == 200, body.text
    check_open_responses(body.json(), "ResponseResource")
    assert body.json()["tool_choice"] == {"type": "custom", "name": "apply_patch"}
    assert live.recorded[-1]["tool_choice"] == "function"
    unknown = create(live, input="patch it", tools=[EXEC], tool_choice={"type": "custom", "name": "apply_patch"})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tool_choice"


def test_allowed_tools_keeps_those_tools(live: LiveServer) -> None:
    read = {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "custom", "name": "exec"}]}
    body = create(live, input="run it", tools=[APPLY_PATCH, EXEC, read], tool_choice=choice)
    assert body.status_code == 200, body.text
    check_open_responses(body.json(), "ResponseResource")
    assert [t["name"] for t in live.recorded[-1]["tools"]] == ["exec"]
    required = {**choice, "mode": "required", "tools": [{"type": "custom", "name": "apply_patch"}]}
    assert create(live, input="patch it", tools=[APPLY_PATCH, read], tool_choice=required).status_code == 200
    assert live.recorded[-1]["tool_choice"] == "required" and [t["name"] for t in live.recorded[-1]["tools"]] == [
        "apply_patch"
    ]
    stray = {**choice, "tools": [{"type": "function", "name": "nope"}]}
    error = create(live, input="run it", tools=[EXEC], tool_choice=stray).json()["error"]
    assert error["param"] == "tool_choice.tools[0]"


@pytest.mark.parametrize(
    ("fmt", "param", "words"),
    [
        ({"type": "grammar", "syntax": "lark", "definition": "start: (("}, "tools[0].format", "cannot compile"),
        ({"type": "grammar", "syntax": "lark", "definition": 'start: a\na: "x" a | "y"'}, "tools[0].format", "itself"),
        ({"type": "grammar", "syntax": "regex", "definition": "(?<=a)b"}, "tools[0].format", "look-around"),
        ({"type": "grammar", "syntax": "ebnf", "definition": "x"}, "tools[0].format", "unknown grammar syntax"),
        ({"type": "grammar", "syntax": "lark"}, "tools[0].format", "definition"),
        ({"type": "json"}, "tools[0].format.type", "unknown custom tool format"),
        ("text", "tools[0].format", "must be an object"),
    ],
)
def test_a_format_the_engine_cannot_compile_is_a_400_naming_it(
    live: LiveServer, fmt: Any, param: str, words: str
) -> None:
    response = create(live, input="hi", tools=[{"type": "custom", "name": "t", "format": fmt}])
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == param and words in error["message"], error


def test_a_model_that_cannot_hold_an_input_to_a_grammar_refuses_one() -> None:
    with live_server(StubBackend(script(freeform_grammars=False))) as live:
        refused = create(live, input="hi", tools=[APPLY_PATCH])
        assert refused.status_code == 400
        assert (refused.json()["error"]["param"], refused.json()["error"]["code"]) == (
            "tools[0].format",
            "unsupported_value",
        )
        assert create(live, input="hi", tools=[EXEC]).status_code == 200  # free text needs no grammar


def test_a_scripted_input_that_breaks_the_grammar_fails_the_response(live: LiveServer) -> None:
    events = stream(live, input="broken", tools=[APPLY_PATCH])
    final = check_stream(events)
    assert final["status"] == "failed" and "does not parse" in final["error"]["message"]


def test_compaction_reads_the_custom_items() -> None:
    from tinytitan.engine.passes.compaction import HANDOVER_ASK

    rules = [{"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": "Patched src/app.py."}}]
    with live_server(StubBackend(script(*rules))) as live:
        items = [
            {"role": "user", "content": "patch it"},
            {"type": "custom_tool_call", "call_id": "call_7", "name": "apply_patch", "input": PATCH},
            {"type": "custom_tool_call_output", "call_id": "call_7", "output": "Done!"},
        ]
        body = {"model": STUB_MODEL, "input": items}
        compacted = httpx.post(live.v1 + "/responses/compact", json=body, timeout=60)
        assert compacted.status_code == 200, compacted.text
        check_open_responses(compacted.json(), "CompactResource")
        # the compaction pass continues the conversation (issue 40): the custom call and its output are
        # turns of it, as the model read them
        *turns, ask = live.recorded[-1]["messages"]
        assert HANDOVER_ASK in ask["content"]
        (call,) = [c for t in turns for c in t["tool_calls"]]
        assert (call["type"], call["name"], call["arguments"]) == ("custom", "apply_patch", PATCH)
        assert turns[-1] == {"role": "tool", "content": "Done!", "tool_calls": [], "tool_call_id": "call_7"}
