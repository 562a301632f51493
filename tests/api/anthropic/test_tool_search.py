"""Tool search on Messages (issue 39): the search server tools run inside the request, deferred tools
stay out of the prompt, ``tool_reference`` blocks sent back expand, and the refusals — every answer and
stream event checked against Anthropic's documented shapes on the way in."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import anthropic
import httpx
import httpx2
import pytest

from tinytitan.engine.models.stub import stub_tokens
from tinytitan.testing.mcp_server import NEEDLE, tool_definitions
from tinytitan.testing.messages_events import check_messages_answer, check_messages_stream
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer
from tinytitan.testing.sse import events as sse_events

from .support import MODEL

Serve = Callable[..., AbstractContextManager[LiveServer]]
REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
BM25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": NEEDLE}, "reply": {"text": "Sunny in Paris."}},
    {"when": {"revealed": NEEDLE}, "reply": {"tool_calls": [{"name": NEEDLE, "arguments": {"city": "Paris"}}]}},
    {"when": {"user_contains": "bad regex"}, "reply": {"search": "(unclosed"}},
    {"when": {"user_contains": "nothing"}, "reply": {"search": "^no_such_tool$"}},
    {"when": {"user_contains": "weather"}, "reply": {"text": "Let me find a tool.", "search": "forecast"}},
    {"reply": {"text": "hello"}},
]


def deferred_tools() -> list[dict[str, Any]]:
    return [{**t, "defer_loading": True} for t in tool_definitions()]


def ask(text: str, search: dict[str, Any] = REGEX, **fields: Any) -> dict[str, Any]:
    body = {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": text}]}
    return {**body, "tools": [search, *deferred_tools()], **fields}


def _checked(response: httpx2.Response) -> None:
    response.read()
    check_messages_answer(
        response.request.url.path, response.status_code, response.headers["content-type"], response.text
    )


@pytest.fixture
def live(serve: Serve) -> Iterator[LiveServer]:
    with serve(script(*RULES, context_window=32768)) as server:
        yield server


@pytest.fixture
def sdk(live: LiveServer) -> Iterator[anthropic.Anthropic]:
    http = httpx2.Client(event_hooks={"response": [_checked]}, timeout=30)
    with anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0, http_client=http) as client:
        yield client


def post(live: LiveServer, body: dict[str, Any], path: str = "/v1/messages") -> httpx.Response:
    response = httpx.post(live.url + path, json=body, timeout=30)
    check_messages_answer(path, response.status_code, response.headers["content-type"], response.text)
    return response


def test_a_regex_search_runs_in_the_request_and_reveals_the_tool(live: LiveServer) -> None:
    message = post(live, ask("what is the weather in Paris?")).json()
    kinds = [b["type"] for b in message["content"]]
    assert kinds == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"], message
    text, use, result, call = message["content"]
    assert text["text"] == "Let me find a tool."
    assert use["name"] == "tool_search_tool_regex" and use["input"] == {"pattern": "forecast"}
    assert result["tool_use_id"] == use["id"] and use["id"].startswith("srvtoolu_")
    names = [r["tool_name"] for r in result["content"]["tool_references"]]
    assert names[0] == NEEDLE and all("forecast" in n for n in names) and len(names) == 5  # the default limit
    assert call["name"] == NEEDLE and call["input"] == {"city": "Paris"}
    assert message["stop_reason"] == "tool_use"

    first, second = live.recorded
    assert len(first["deferred"]) == 105 and [t["name"] for t in first["tools"]] == ["tool_search_tool_regex"]
    assert not any(t["name"] in first["prompt"] for t in tool_definitions())  # no deferred name in the prompt
    assert NEEDLE in second["revealed"] and f'"name": "{NEEDLE}"' in second["prompt"]
    assert second["prompt"].startswith(first["prompt"])  # the search round continues the same prompt
    # the usage counts both rounds, the second one served from the first one's cache
    assert message["usage"]["cache_read_input_tokens"] > 0


def test_the_stream_shows_the_search_where_it_ran(sdk: anthropic.Anthropic, live: LiveServer) -> None:
    with sdk.beta.messages.stream(**ask("weather in Paris?")) as stream:
        streamed = stream.get_final_message()
    whole = post(live, ask("weather in Paris?")).json()
    assert [b.type for b in streamed.content] == [b["type"] for b in whole["content"]]
    search = streamed.content[1]
    assert search.type == "server_tool_use" and search.input == {"pattern": "forecast"}  # its one input_json_delta
    raw = httpx.post(live.url + "/v1/messages", json={**ask("weather in Paris?"), "stream": True}, timeout=30)
    frames = check_messages_stream(sse_events(raw.text))
    result_start = [d for _, d in frames if d["type"] == "content_block_start"][2]
    assert result_start["content_block"]["type"] == "tool_search_tool_result"
    assert result_start["content_block"]["content"]["tool_references"][0] == {
        "type": "tool_reference",
        "tool_name": NEEDLE,
    }


def test_the_answer_sent_back_renders_the_same_prompt(live: LiveServer) -> None:
    """Turn 2 (the search's blocks and the tool's result sent back) continues turn 1's last prompt:
    the prompt cache serves all of it, the deferred tools still stay out of the tool list."""
    request = ask("what is the weather in Paris?")
    answer = post(live, request).json()
    call = answer["content"][-1]
    turn2 = {
        **request,
        "messages": [
            *request["messages"],
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "21 C, sunny"}]},
        ],
    }
    second = post(live, turn2).json()
    assert second["content"] == [{"type": "text", "text": "Sunny in Paris."}]
    last_round, next_turn = live.recorded[1], live.recorded[2]
    assert next_turn["prompt"].startswith(last_round["prompt"])
    assert NEEDLE in next_turn["revealed"] and next_turn["tools"] == last_round["tools"]
    assert second["usage"]["cache_read_input_tokens"] >= len(stub_tokens(last_round["prompt"])) - 1  # all of it


def test_a_bm25_search(live: LiveServer) -> None:
    message = post(live, ask("weather please", BM25)).json()
    use, result = message["content"][1:3]
    assert use["name"] == "tool_search_tool_bm25" and use["input"] == {"query": "forecast"}
    assert result["content"]["tool_references"][0]["tool_name"].endswith("forecast")


def test_a_bad_regex_from_the_model_is_the_search_error(live: LiveServer) -> None:
    message = post(live, ask("a bad regex please")).json()
    use, result = message["content"][:2]
    assert use["input"] == {"pattern": "(unclosed"}
    assert result["content"]["type"] == "tool_search_tool_result_error"
    assert result["content"]["error_code"] == "invalid_tool_input"
    assert "regular expression" in result["content"]["error_message"]


def test_a_search_that_finds_nothing(live: LiveServer) -> None:
    message = post(live, ask("find nothing")).json()
    assert message["content"][1]["content"] == {"type": "tool_search_tool_search_result", "tool_references": []}
    assert "No tools matched" in live.recorded[-1]["prompt"]


def client_searched(*names: str, **fields: Any) -> dict[str, Any]:
    """A conversation in which a client's own search (Claude Code's ToolSearch) answered with
    ``tool_reference`` blocks naming ``names``."""
    client_search = {
        "name": "ToolSearch",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
    references = [{"type": "tool_reference", "tool_name": name} for name in names]
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "tools": [client_search, *deferred_tools()],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": references}]},
        ],
        **fields,
    }


def test_a_tool_reference_in_a_tool_result_reveals_the_tool(live: LiveServer) -> None:
    """A client's own search (Claude Code's ToolSearch): its result names tools; the server expands them."""
    message = post(live, client_searched(NEEDLE)).json()
    assert message["content"][0]["name"] == NEEDLE
    recorded = live.recorded[-1]
    assert recorded["revealed"] == [NEEDLE] and [t["name"] for t in recorded["tools"]] == ["ToolSearch"]
    assert recorded["messages"][-1]["content"].startswith("<functions>\n<function>")


def test_a_named_tool_choice_may_force_a_revealed_tool(serve: Serve) -> None:
    """A revealed deferred tool is callable, so a named choice may force it; one no search revealed is
    refused by name (the model has not seen its definition)."""
    with serve(script(*RULES, context_window=32768, forced_tool_calls=True)) as server:
        forced = {"type": "tool", "name": NEEDLE}
        message = post(server, client_searched(NEEDLE, tool_choice=forced)).json()
        assert [(b["type"], b["name"]) for b in message["content"]] == [("tool_use", NEEDLE)], message
        assert server.recorded[-1]["revealed"] == [NEEDLE]

        other = next(t["name"] for t in tool_definitions() if t["name"] != NEEDLE)
        response = post(server, client_searched(NEEDLE, tool_choice={"type": "tool", "name": other}))
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["message"].startswith(f"tool_choice: tool_choice names '{other}', a deferred tool"), error


def test_a_tool_reference_in_a_tool_result_to_no_tool_is_refused_by_name(live: LiveServer) -> None:
    response = post(live, client_searched("no_such_tool"))
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"].startswith("messages[2].content[0].content[0].tool_name: "), answer


def test_count_tokens_counts_what_the_model_sees(live: LiveServer) -> None:
    def count(tools: list[dict[str, Any]]) -> int:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": tools}
        return int(post(live, body, "/v1/messages/count_tokens").json()["input_tokens"])

    deferred, plain = count([REGEX, *deferred_tools()]), count([REGEX, *tool_definitions()])
    assert deferred == count([REGEX])  # deferred tools cost nothing until a search reveals them
    assert plain - deferred > 0.9 * (plain - count([]))  # ≥ 90 % fewer prompt tokens from tools


def _call_and_result(pattern: str, references: list[str]) -> list[dict[str, Any]]:
    content = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": n} for n in references],
    }
    return [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "tool_search_tool_regex",
                    "input": {"pattern": pattern},
                },
                {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": content},
            ],
        },
        {"role": "user", "content": "go on"},
    ]


REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    (
        "a reference to no tool",
        ask("x", messages=_call_and_result("forecast", ["no_such_tool"])),
        "messages[1].content[1].content.tool_references[0].tool_name: tool_reference names 'no_such_tool'",
    ),
    (
        "the search tool deferred",
        ask("x", search={**REGEX, "defer_loading": True}),
        "tools[0].defer_loading: the tool search tool 'tool_search_tool_regex' cannot be deferred",
    ),
    (
        "every tool deferred",
        {**ask("x"), "tools": deferred_tools()},
        "tools: every tool has defer_loading: true",
    ),
    (
        "a bad regex sent back",
        ask("x", messages=_call_and_result("(unclosed", [NEEDLE])),
        "messages[1].content[0].input.pattern: pattern is not a valid regular expression",
    ),
    (
        "a search tool under another name",
        ask("x", search={**REGEX, "name": "find"}),
        "tools[0].name: a tool_search_tool_regex_20251119 tool must be named 'tool_search_tool_regex'",
    ),
]


@pytest.mark.parametrize(("body", "prefix"), [(b, p) for _, b, p in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_refusals_name_the_field(live: LiveServer, body: dict[str, Any], prefix: str) -> None:
    response = post(live, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(prefix), error


def test_a_failed_search_sent_back_keeps_its_pattern(live: LiveServer) -> None:
    """A search whose result was its error is history as it happened, bad pattern and all."""
    messages = _call_and_result("(unclosed", [])
    error = {"type": "tool_search_tool_result_error", "error_code": "invalid_tool_input", "error_message": "bad"}
    messages[1]["content"][1]["content"] = error
    response = post(live, ask("x", messages=messages))
    assert response.status_code == 200, response.text
    assert "Error: invalid_tool_input: bad" in json.dumps(live.recorded[-1]["messages"])
