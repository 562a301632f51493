"""Every request rule of reference §12 (and the shared ones it names), as a table: status, type, field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer, live_server

from .support import CONTEXT, MODEL, RULES, WEATHER_TOOL, body

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
DOCUMENT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
SEARCH_RESULT = {"type": "search_result", "source": "https://x", "title": "x", "content": []}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
RESULT_WITH_IMAGE = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [IMAGE]}
ORPHAN_RESULT = {"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}
EDITOR = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}


def turns(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return body(messages=list(messages), **fields)


def without(field: str) -> dict[str, Any]:
    out = body()
    del out[field]
    return out


CASES: list[tuple[str, dict[str, Any], int, str, str]] = [
    # (id, request, status, error type, message prefix naming the field)
    ("model missing", without("model"), 400, "invalid_request_error", "model: "),
    ("model unknown", body(model="claude-sonnet-4-5"), 404, "not_found_error", "model: "),
    ("messages missing", without("messages"), 400, "invalid_request_error", "messages: "),
    ("messages empty", body(messages=[]), 400, "invalid_request_error", "messages: "),
    ("max_tokens missing", without("max_tokens"), 400, "invalid_request_error", "max_tokens: "),
    ("max_tokens zero", body(max_tokens=0), 400, "invalid_request_error", "max_tokens: "),
    ("max_tokens wrong type", body(max_tokens="many"), 400, "invalid_request_error", "max_tokens: "),
    ("system image block", body(system=[IMAGE]), 400, "invalid_request_error", "system[0]: image blocks"),
    (
        "prefill",
        turns({"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}),
        400,
        "invalid_request_error",
        "messages[1]: a trailing assistant message (prefill) is not supported",
    ),
    ("unknown role", turns({"role": "developer", "content": "hi"}), 400, "invalid_request_error", "messages[0].role: "),
    (
        "image block",
        body([IMAGE]),
        400,
        "invalid_request_error",
        "messages[0].content[0]: model 'stub-model' has no vision input",
    ),
    (
        "document block",
        body([{"type": "text", "text": "see"}, DOCUMENT]),
        400,
        "invalid_request_error",
        "messages[0].content[1]: document blocks are not supported; this server is text-only",
    ),
    (
        "search_result block",
        body([SEARCH_RESULT]),
        400,
        "invalid_request_error",
        "messages[0].content[0]: search_result blocks are not supported",
    ),
    (
        "image inside a tool_result",
        turns(
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [CALL]},
            {"role": "user", "content": [RESULT_WITH_IMAGE]},
            tools=[WEATHER_TOOL],
        ),
        400,
        "invalid_request_error",
        "messages[2].content[0].content[0]: model 'stub-model' has no vision input",
    ),
    ("tool_use from the user", body([CALL]), 400, "invalid_request_error", "messages[0].content[0]: "),
    (
        "tool_result without an id",
        body([{"type": "tool_result", "content": "x"}]),
        400,
        "invalid_request_error",
        "messages[0].content[0].tool_use_id: ",
    ),
    (
        "tool_result answering nothing",
        body([ORPHAN_RESULT]),
        400,
        "invalid_request_error",
        "messages[0].content[0].tool_use_id: ",
    ),
    (
        "bash tool",
        body(tools=[{"type": "bash_20250124", "name": "bash"}]),
        400,
        "invalid_request_error",
        "tools[0].type: tools of type 'bash_20250124'",
    ),
    ("text editor tool", body(tools=[WEATHER_TOOL, EDITOR]), 400, "invalid_request_error", "tools[1].type: "),
    (
        "web search tool",
        body(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
        400,
        "invalid_request_error",
        "tools[0].type: ",
    ),
    (
        "tool name",
        body(tools=[{"name": "bad name!", "input_schema": {"type": "object"}}]),
        400,
        "invalid_request_error",
        "tools[0].name: ",
    ),
    (
        "tool schema",
        body(tools=[{"name": "t", "input_schema": {"type": "array"}}]),
        400,
        "invalid_request_error",
        "tools[0].input_schema: ",
    ),
    (
        "tool_choice any",
        body(tools=[WEATHER_TOOL], tool_choice={"type": "any"}),
        400,
        "invalid_request_error",
        "tool_choice: ",
    ),
    (
        "tool_choice tool",
        body(tools=[WEATHER_TOOL], tool_choice={"type": "tool", "name": "get_weather"}),
        400,
        "invalid_request_error",
        "tool_choice: ",
    ),
    (
        "tool_choice unknown",
        body(tool_choice={"type": "sometimes"}),
        400,
        "invalid_request_error",
        "tool_choice.type: ",
    ),
    (
        "disable_parallel_tool_use",
        body(tools=[WEATHER_TOOL], tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
        400,
        "invalid_request_error",
        "tool_choice.disable_parallel_tool_use: ",
    ),
    ("temperature above 1", body(temperature=1.5), 400, "invalid_request_error", "temperature: "),
    ("temperature negative", body(temperature=-0.1), 400, "invalid_request_error", "temperature: "),
    ("top_p above 1", body(top_p=1.5), 400, "invalid_request_error", "top_p: "),
    ("top_k zero", body(top_k=0), 400, "invalid_request_error", "top_k: "),
    ("stop_sequences empty string", body(stop_sequences=[""]), 400, "invalid_request_error", "stop_sequences: "),
    (
        "stop_sequences too many",
        body(stop_sequences=["a", "b", "c", "d", "e"]),
        400,
        "invalid_request_error",
        "stop_sequences: ",
    ),
    (
        "thinking without budget",
        body(thinking={"type": "enabled"}),
        400,
        "invalid_request_error",
        "thinking.budget_tokens: ",
    ),
    (
        "thinking budget below 1024",
        body(thinking={"type": "enabled", "budget_tokens": 1023}, max_tokens=4096),
        400,
        "invalid_request_error",
        "thinking.budget_tokens: ",
    ),
    (
        "thinking budget not an integer",
        body(thinking={"type": "enabled", "budget_tokens": 2048.5}, max_tokens=4096),
        400,
        "invalid_request_error",
        "thinking.budget_tokens: ",
    ),
    (
        "thinking budget not below max_tokens",
        body(thinking={"type": "enabled", "budget_tokens": 2048}, max_tokens=2048),
        400,
        "invalid_request_error",
        "thinking.budget_tokens: ",
    ),
    (
        "thinking budget not below the clamped max_tokens",
        body(thinking={"type": "enabled", "budget_tokens": 20000}, max_tokens=32000),
        400,
        "invalid_request_error",
        "thinking.budget_tokens: ",
    ),
    ("thinking type", body(thinking={"type": "sometimes"}), 400, "invalid_request_error", "thinking.type: "),
    (
        "legacy output_format",
        body(output_format={"type": "json_schema", "schema": {"type": "object"}}),
        400,
        "invalid_request_error",
        "output_format: ",
    ),
    (
        "output_config.format type",
        body(output_config={"format": {"type": "xml"}}),
        400,
        "invalid_request_error",
        "output_config.format.type: ",
    ),
    (
        "output_config.format without schema",
        body(output_config={"format": {"type": "json_schema"}}),
        400,
        "invalid_request_error",
        "output_config.format.",
    ),
    ("container", body(container="cntr_1"), 400, "invalid_request_error", "container: "),
    (
        "mcp_servers",
        body(mcp_servers=[{"type": "url", "url": "https://x", "name": "x"}]),
        400,
        "invalid_request_error",
        "mcp_servers: ",
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES, context_window=CONTEXT))) as live:
        yield live


@pytest.mark.parametrize(
    ("request_body", "status", "kind", "prefix"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_refusal(server: LiveServer, request_body: dict[str, Any], status: int, kind: str, prefix: str) -> None:
    response = httpx.post(
        server.url + "/v1/messages", json=request_body, headers={"anthropic-version": "2023-06-01"}, timeout=30
    )
    assert response.status_code == status, response.text
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == kind
    assert error["error"]["message"].startswith(prefix), error["error"]["message"]
    assert error["request_id"] == response.headers["request-id"]


COUNT_CASES = [
    c
    for c in CASES
    if c[0]
    not in {
        "max_tokens missing",
        "thinking budget not below max_tokens",
        "thinking budget not below the clamped max_tokens",
    }
]


@pytest.mark.parametrize(
    ("request_body", "status", "kind", "prefix"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES]
)
def test_count_tokens_refuses_the_same(
    server: LiveServer, request_body: dict[str, Any], status: int, kind: str, prefix: str
) -> None:
    response = httpx.post(server.url + "/v1/messages/count_tokens", json=request_body, timeout=30)
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == kind
    assert response.json()["error"]["message"].startswith(prefix)


@pytest.mark.parametrize(
    "accepted",
    [
        {"metadata": {"user_id": '{"device_id": "d", "account_uuid": "", "session_id": "s"}'}},
        {"service_tier": "standard_only"},
        {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
        {"output_config": {"effort": "high"}},
        {"thinking": {"type": "adaptive"}},
        {"thinking": {"type": "disabled"}},
        {"tool_choice": {"type": "none"}, "tools": [WEATHER_TOOL]},
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": False}, "tools": [WEATHER_TOOL]},
        {
            "tools": [
                {
                    **WEATHER_TOOL,
                    "type": "custom",
                    "strict": True,
                    "cache_control": {"type": "ephemeral"},
                    "input_examples": [{"city": "Oslo"}],
                    "eager_input_streaming": True,
                    "defer_loading": False,
                }
            ]
        },
        {"temperature": 1.0, "top_p": 1.0, "top_k": 40, "stop_sequences": ["END"]},
        {"max_tokens": 10**6},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}, "citations": None},
                    ],
                }
            ]
        },
    ],
    ids=lambda d: ",".join(d),
)
def test_accepted_fields(server: LiveServer, accepted: dict[str, Any]) -> None:
    response = httpx.post(server.url + "/v1/messages?beta=true", json=body(**accepted), timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["model"] == MODEL


def test_errors_name_the_clients_own_message_index(server: LiveServer) -> None:
    """Mapping merges user turns and splits tool results out; errors still point at the client's index."""
    body = {
        "model": MODEL,
        "max_tokens": 50,
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "three"},
                    {"type": "tool_result", "tool_use_id": "nope", "content": "r"},
                ],
            },
        ],
    }
    r = httpx.post(server.url + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("messages[2].content[1].tool_use_id: ")


def test_a_prompt_past_the_window_is_refused_in_the_apis_own_words() -> None:
    """Anthropic answers ``prompt is too long: N tokens > M maximum``; Claude Code reads those numbers
    to trim its conversation (or compact) and retry, so the local server says it the same way."""
    import re

    with live_server(StubBackend(script(context_window=64))) as live:
        response = httpx.post(
            live.url + "/v1/messages",
            json=body(messages=[{"role": "user", "content": "word " * 400}]),
            headers={"anthropic-version": "2023-06-01"},
            timeout=30,
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    found = re.fullmatch(r"prompt is too long: (\d+) tokens > (\d+) maximum", error["message"])
    assert found is not None, error
    assert int(found.group(1)) > 64 and found.group(2) == "64"
