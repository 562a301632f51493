"""Every refusal of reference §4 and §1 on Chat Completions: status, type, code and param."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

USER = {"role": "user", "content": "hi"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(context_window=4096))) as server:
        yield server


def body(**fields: Any) -> dict[str, Any]:
    return {"model": STUB_MODEL, "messages": [USER], **fields}


# (id, request body, status, code, param)
CASES: list[tuple[str, dict[str, Any], int, str, str | None]] = [
    ("model missing", {"messages": [USER]}, 400, "invalid_value", "model"),
    ("messages missing", {"model": STUB_MODEL}, 400, "invalid_value", "messages"),
    ("messages empty", body(messages=[]), 400, "invalid_message", "messages"),
    ("too many messages", body(messages=[USER] * 1001), 400, "value_too_large", "messages"),
    ("unknown role", body(messages=[{"role": "robot", "content": "x"}]), 400, "invalid_message", "messages[0].role"),
    (
        "guidance after turn",
        body(messages=[USER, {"role": "system", "content": "s"}]),
        400,
        "invalid_message",
        "messages[1].role",
    ),
    (
        "image part",
        body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
        400,
        "unsupported_content",
        "messages[0].content[0]",
    ),
    (
        "tool calls on user",
        body(messages=[{"role": "user", "content": "x", "tool_calls": [CALL]}]),
        400,
        "invalid_tool_call",
        "messages[0].tool_calls",
    ),
    (
        "duplicate call ids",
        body(messages=[USER, {"role": "assistant", "tool_calls": [CALL, CALL]}]),
        400,
        "invalid_tool_call",
        "messages[1].tool_calls[1].id",
    ),
    (
        "empty call id",
        body(messages=[USER, {"role": "assistant", "tool_calls": [{**CALL, "id": ""}]}]),
        400,
        "invalid_tool_call",
        "messages[1].tool_calls[0].id",
    ),
    (
        "arguments not an object",
        body(
            messages=[
                USER,
                {"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "[1]"}}]},
            ]
        ),
        400,
        "invalid_tool_arguments",
        "messages[1].tool_calls[0].function.arguments",
    ),
    (
        "tool answers nothing",
        body(messages=[USER, {"role": "tool", "tool_call_id": "nope", "content": "r"}]),
        400,
        "invalid_tool_result",
        "messages[1].tool_call_id",
    ),
    (
        "ends with unresolved call",
        body(messages=[USER, {"role": "assistant", "tool_calls": [CALL]}]),
        400,
        "invalid_tool_call",
        "messages",
    ),
    ("temperature high", body(temperature=2.5), 400, "invalid_value", "temperature"),
    ("temperature negative", body(temperature=-0.1), 400, "invalid_value", "temperature"),
    ("top_p zero", body(top_p=0), 400, "invalid_value", "top_p"),
    ("top_p above one", body(top_p=1.5), 400, "invalid_value", "top_p"),
    ("top_k zero", body(top_k=0), 400, "invalid_value", "top_k"),
    ("top_k too big", body(top_k=257), 400, "invalid_value", "top_k"),
    ("repetition_penalty zero", body(repetition_penalty=0), 400, "invalid_value", "repetition_penalty"),
    ("frequency_penalty", body(frequency_penalty=0.5), 400, "unsupported_value", "frequency_penalty"),
    ("seed negative", body(seed=-1), 400, "invalid_value", "seed"),
    ("both caps", body(max_tokens=5, max_completion_tokens=5), 400, "invalid_value", "max_completion_tokens"),
    ("cap zero", body(max_tokens=0), 400, "invalid_value", "max_tokens"),
    ("cap negative", body(max_completion_tokens=-3), 400, "invalid_value", "max_completion_tokens"),
    (
        "prompt above context",
        body(messages=[{"role": "user", "content": "word " * 5000}]),
        400,
        "context_length_exceeded",
        "messages",
    ),
    ("five stops", body(stop=["a", "b", "c", "d", "e"]), 400, "invalid_value", "stop"),
    ("empty stop", body(stop=[""]), 400, "invalid_value", "stop"),
    ("stop too long", body(stop=["x" * 200, "y" * 100]), 400, "invalid_value", "stop"),
    ("tool type", body(tools=[{"type": "web_search"}]), 400, "unsupported_tool", "tools[0].type"),
    (
        "tool name",
        body(tools=[{"type": "function", "function": {"name": "bad name"}}]),
        400,
        "invalid_tool_name",
        "tools[0].function.name",
    ),
    (
        "tool schema",
        body(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]),
        400,
        "invalid_tool_schema",
        "tools[0].function.parameters",
    ),
    ("tool_choice required", body(tools=[TOOL], tool_choice="required"), 400, "unsupported_value", "tool_choice"),
    (
        "tool_choice named",
        body(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "f"}}),
        400,
        "unsupported_value",
        "tool_choice",
    ),
    ("tool_choice unknown word", body(tool_choice="sometimes"), 400, "invalid_value", "tool_choice"),
    ("n", body(n=2), 400, "unsupported_value", "n"),
    ("logprobs", body(logprobs=True), 400, "unsupported_value", "logprobs"),
    ("top_logprobs", body(top_logprobs=2), 400, "unsupported_value", "top_logprobs"),
    (
        "include_usage without stream",
        body(stream_options={"include_usage": True}),
        400,
        "invalid_value",
        "stream_options.include_usage",
    ),
    (
        "json_schema without schema",
        body(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
        400,
        "invalid_value",
        "response_format.json_schema.schema",
    ),
    (
        "response_format unknown type",
        body(response_format={"type": "yaml"}),
        400,
        "unsupported_value",
        "response_format.type",
    ),
    ("wrong-typed field", body(temperature="hot"), 400, "invalid_json", "temperature"),
    ("wrong-typed nested field", body(messages=[{"role": 3, "content": "x"}]), 400, "invalid_json", "messages[0].role"),
    (
        "enable_thinking not bool",
        body(chat_template_kwargs={"enable_thinking": "yes"}),
        400,
        "invalid_json",
        "chat_template_kwargs.enable_thinking",
    ),
    ("unknown model", body(model="claude-sonnet-4-5"), 404, "model_not_found", "model"),
]


@pytest.mark.parametrize(("case", "request_body", "status", "code", "param"), CASES, ids=[c[0] for c in CASES])
def test_refusal(
    live: LiveServer, case: str, request_body: dict[str, Any], status: int, code: str, param: str | None
) -> None:
    r = httpx.post(live.v1 + "/chat/completions", json=request_body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error.get("param") == param
    assert error["message"]
    assert r.headers["openai-version"] == "2020-10-01"


TRANSPORT: list[tuple[str, dict[str, Any], int, str]] = [
    ("malformed json", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
    ("top-level array", {"content": b"[1, 2]", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
    (
        "text/plain body",
        {"content": b'{"model": "x"}', "headers": {"content-type": "text/plain"}},
        415,
        "unsupported_media_type",
    ),
    ("no content type", {"content": b'{"model": "x"}', "headers": {"content-type": ""}}, 415, "unsupported_media_type"),
    (
        "huge body",
        {
            "content": b'{"model": "' + b"x" * (33 * 1024 * 1024) + b'"}',
            "headers": {"content-type": "application/json"},
        },
        413,
        "request_too_large",
    ),
]


@pytest.mark.parametrize(("case", "kwargs", "status", "code"), TRANSPORT, ids=[c[0] for c in TRANSPORT])
def test_transport_refusal(live: LiveServer, case: str, kwargs: dict[str, Any], status: int, code: str) -> None:
    r = httpx.post(live.v1 + "/chat/completions", timeout=60, **kwargs)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


def test_a_wrong_typed_field_is_named_with_the_type_it_wants(live: LiveServer) -> None:
    """Well-formed JSON whose field has the wrong type: the field and the types, in words (not "malformed")."""
    r = httpx.post(live.v1 + "/chat/completions", json=body(max_tokens="5"))
    error = r.json()["error"]
    assert (r.status_code, error["param"]) == (400, "max_tokens")
    said = error["message"]
    assert said == "max_tokens: this field has the wrong type: expected an integer or null, got a string", said


def test_wrong_method_and_unknown_path(live: LiveServer) -> None:
    r = httpx.get(live.v1 + "/chat/completions")
    assert (r.status_code, r.json()["error"]["code"]) == (405, "method_not_allowed")
    r = httpx.get(live.v1 + "/nowhere")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    assert r.headers["openai-version"] == "2020-10-01"


def test_query_string_is_ignored_for_routing(live: LiveServer) -> None:
    r = httpx.post(live.v1 + "/chat/completions?beta=true", json=body())
    assert r.status_code == 200


ODD: list[Any] = [
    {},
    {"model": None},
    {"model": STUB_MODEL, "messages": None},
    {"model": STUB_MODEL, "messages": [{}]},
    {"model": STUB_MODEL, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
    {"model": STUB_MODEL, "messages": [USER], "tools": [{"type": "function"}]},
    {"model": STUB_MODEL, "messages": [USER], "tool_choice": {"type": "function"}},
    {"model": STUB_MODEL, "messages": [USER], "stop": 5},
    {"model": STUB_MODEL, "messages": [USER], "seed": 2**70},
    {"model": STUB_MODEL, "messages": [USER], "response_format": "json"},
]


@pytest.mark.parametrize("request_body", ODD)
def test_no_refusal_is_a_server_error(live: LiveServer, request_body: Any) -> None:
    """A grab bag of odd but well-formed bodies: 4xx at worst, never 5xx."""
    r = httpx.post(live.v1 + "/chat/completions", json=request_body)
    assert r.status_code < 500, r.text


def test_a_cap_above_the_context_is_clamped_not_refused(live: LiveServer) -> None:
    """pi sends ``max_completion_tokens: 16384`` on every turn; a smaller window serves what it has (§4)."""
    r = httpx.post(live.v1 + "/chat/completions", json=body(max_completion_tokens=16384), timeout=30)
    assert r.status_code == 200, r.text
    recorded = live.recorded[-1]
    assert recorded["max_new"] == 4096 - r.json()["usage"]["prompt_tokens"]


def test_an_assistant_refusal_part_is_text(live: LiveServer) -> None:
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    r = httpx.post(live.v1 + "/chat/completions", json=body(messages=[USER, refusal, USER]), timeout=30)
    assert r.status_code == 200, r.text
    assert live.recorded[-1]["messages"][1] == {
        "role": "assistant",
        "content": "I can't help with that.",
        "tool_calls": [],
        "tool_call_id": None,
    }
