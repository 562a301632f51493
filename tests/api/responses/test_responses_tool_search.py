"""Tool search on Responses (issue 39): the hosted ``tool_search`` runs inside the request over deferred
namespace tools; a client's own (``execution: "client"``, Codex's) surfaces as its call item and its
output reveals the tools; HTTP, the SDK's stream and the WebSocket, every event schema-checked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tinytitan.engine.models.stub import StubBackend, stub_tokens
from tinytitan.testing.mcp_server import NEEDLE, TOOLS
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.sse import events as sse_events
from tinytitan.testing.websocket import open_socket
from tinytitan.testing.wire_schemas import check_open_responses

RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": NEEDLE}, "reply": {"text": "Sunny in Paris."}},
    {"when": {"revealed": NEEDLE}, "reply": {"tool_calls": [{"name": NEEDLE, "arguments": {"city": "Paris"}}]}},
    {"when": {"user_contains": "weather"}, "reply": {"text": "Let me find a tool.", "search": "forecast temperature"}},
    {"reply": {"text": "hello"}},
]
NAMESPACE = {
    "type": "namespace",
    "name": "toolbox",
    "description": "Tools of the toolbox MCP server.",
    "tools": [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["inputSchema"],
            "defer_loading": True,
        }
        for t in TOOLS
    ],
}
HOSTED = {"type": "tool_search"}
CLIENT = {
    "type": "tool_search",
    "execution": "client",
    "description": "Searches over deferred tool metadata with BM25.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"],
    },
}


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES, context_window=32768))) as server:
        yield server


def create(live: LiveServer, **body: Any) -> dict[str, Any]:
    response = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, **body}, timeout=30)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    check_open_responses(result, "ResponseResource")
    return result


def test_the_hosted_search_runs_in_the_request(live: LiveServer) -> None:
    response = create(live, input="weather in Paris?", tools=[HOSTED, NAMESPACE])
    kinds = [item["type"] for item in response["output"]]
    assert kinds == ["message", "tool_search_call", "tool_search_output", "function_call"], kinds
    _, call, found, function = response["output"]
    assert call["execution"] == "server" and call["arguments"] == {"query": "forecast temperature"}
    assert found["execution"] == "server" and found["call_id"] == call["call_id"]
    (space,) = found["tools"]
    assert space["type"] == "namespace" and space["name"] == "toolbox" and space["description"].startswith("Tools")
    assert space["tools"][0]["name"] == NEEDLE and all(t["defer_loading"] for t in space["tools"])
    assert function["name"] == NEEDLE and function["namespace"] == "toolbox"
    first, second = live.recorded[-2:]
    assert len(first["deferred"]) == len(TOOLS) and [t["name"] for t in first["tools"]] == ["tool_search"]
    assert not any(t["name"] in first["prompt"] for t in TOOLS)
    assert second["prompt"].startswith(first["prompt"]) and NEEDLE in second["revealed"]


def test_the_stream_carries_the_search_items(live: LiveServer) -> None:
    body = {"model": STUB_MODEL, "input": "weather in Paris?", "tools": [HOSTED, NAMESPACE], "stream": True}
    raw = httpx.post(live.v1 + "/responses", json=body, timeout=30)
    final = check_stream([data for _, data in sse_events(raw.text)])
    assert [i["type"] for i in final["output"]][1:3] == ["tool_search_call", "tool_search_output"]
    sdk = openai.OpenAI(base_url=live.v1, api_key="x", max_retries=0)
    with sdk.responses.stream(model=STUB_MODEL, input="weather in Paris?", tools=[HOSTED, NAMESPACE]) as stream:  # type: ignore[list-item]
        parsed = stream.get_final_response()
    assert [i.type for i in parsed.output] == [i["type"] for i in final["output"]]


def test_the_history_sent_back_renders_the_same_prompt(live: LiveServer) -> None:
    """Codex resends the whole history: the search items render the turns the server ran, so the
    next request starts with the last round's whole prompt (served from the prompt cache)."""
    request = [{"role": "user", "content": "weather in Paris?"}]
    response = create(live, input=request, tools=[HOSTED, NAMESPACE])
    last_round = live.recorded[-1]
    call = response["output"][-1]
    history = [
        *request,
        *response["output"],
        {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"},
    ]
    second = create(live, input=history, tools=[HOSTED, NAMESPACE])
    assert second["output"][-1]["content"][0]["text"] == "Sunny in Paris."
    next_turn = live.recorded[-1]
    assert next_turn["prompt"].startswith(last_round["prompt"])
    assert second["usage"]["input_tokens_details"]["cached_tokens"] >= len(stub_tokens(last_round["prompt"])) - 1
    # previous_response_id continues the same way from the stored items
    chained = create(
        live,
        previous_response_id=response["id"],
        input=[{"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}],
        tools=[HOSTED, NAMESPACE],
    )
    assert chained["output"][-1]["content"][0]["text"] == "Sunny in Paris."
    assert live.recorded[-1]["prompt"] == next_turn["prompt"]


def test_a_client_search_is_its_call_item_and_its_output_reveals(live: LiveServer) -> None:
    """Codex's ``tool_search`` (``execution: "client"``): the model's call is a tool_search_call item the
    client answers; the tools its tool_search_output lists are callable in their namespace."""
    response = create(live, input="weather in Paris?", tools=[CLIENT])
    text, call = response["output"]
    assert text["type"] == "message" and call["type"] == "tool_search_call"
    assert call["execution"] == "client" and call["arguments"] == {"query": "forecast temperature"} and call["call_id"]
    assert live.recorded[-1]["tools"][0]["name"] == "tool_search"
    loaded: dict[str, Any] = {**NAMESPACE, "name": "mcp__toolbox", "tools": list(NAMESPACE["tools"])[:2]}
    output = {
        "type": "tool_search_output",
        "call_id": call["call_id"],
        "execution": "client",
        "status": "completed",
        "tools": [loaded],
    }
    history = [{"role": "user", "content": "weather in Paris?"}, *response["output"], output]
    second = create(live, input=history, tools=[CLIENT])
    (function,) = second["output"]
    assert (
        function["type"] == "function_call" and function["name"] == NEEDLE and function["namespace"] == "mcp__toolbox"
    )
    recorded = live.recorded[-1]
    assert recorded["revealed"] == [t["name"] for t in loaded["tools"]] and len(recorded["tools"]) == 1
    assert recorded["messages"][-1]["content"].startswith("<functions>")


def test_the_websocket_runs_the_search_too(live: LiveServer) -> None:
    with open_socket(live.url) as ws:
        events = ws.run(model=STUB_MODEL, input="weather in Paris?", tools=[HOSTED, NAMESPACE])
    final = check_stream(events)
    assert [i["type"] for i in final["output"]] == [
        "message",
        "tool_search_call",
        "tool_search_output",
        "function_call",
    ]


@pytest.mark.parametrize(
    ("body", "prefix"),
    [
        ({"input": "x", "tools": [{**HOSTED, "defer_loading": True}, NAMESPACE]}, "tools[0].defer_loading: "),
        ({"input": "x", "tools": [{"type": "tool_search", "execution": "elsewhere"}]}, "tools[0].execution: "),
        ({"input": "x", "tools": [NAMESPACE]}, "tools: every tool has defer_loading: true"),
        (
            {
                "input": [
                    {"role": "user", "content": "x"},
                    {"type": "tool_search_output", "call_id": "c", "tools": "all"},
                ]
            },
            "input[1].tools: ",
        ),
    ],
    ids=["search deferred", "unknown execution", "every tool deferred", "output tools not a list"],
)
def test_refusals_name_the_field(live: LiveServer, body: dict[str, Any], prefix: str) -> None:
    response = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, **body}, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == prefix.split(":")[0] and error["message"].startswith(prefix.split(": ", 1)[1]), error
