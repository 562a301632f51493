"""Custom (freeform) tools on Chat Completions (issue 38 item 2): ``{"type": "custom", "custom": {...}}``
tools, assistant ``tool_calls`` of ``type: "custom"`` with ``custom.input`` — in the object, in the
stream, and sent back as history — read by the official SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing import sse
from tinytitan.testing.freeform import PATCH, custom_tool, grammar
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

APPLY_PATCH = custom_tool("apply_patch", grammar("codex_apply_patch"), chat=True)
RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": "apply_patch"}, "reply": {"text": "Patched."}},
    {"when": {"user_contains": "patch"}, "reply": {"tool_calls": [{"name": "apply_patch", "input": PATCH}]}},
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES, forced_tool_calls=True))) as server:
        yield server


def test_the_sdk_reads_a_custom_call_from_the_object(live: LiveServer) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "patch it"}]
    completion = client.chat.completions.create(model=STUB_MODEL, messages=messages, tools=[APPLY_PATCH])  # type: ignore[list-item]
    choice = completion.choices[0]
    (call,) = choice.message.tool_calls or []
    assert choice.finish_reason == "tool_calls" and call.type == "custom"
    assert call.custom.name == "apply_patch" and call.custom.input == PATCH
    # the call and its result go back as history: the engine reads the call's input as sent
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": "Done!"},
    ]
    follow = client.chat.completions.create(model=STUB_MODEL, messages=messages, tools=[APPLY_PATCH])  # type: ignore[list-item]
    assert follow.choices[0].message.content == "Patched."
    sent = live.recorded[-1]["messages"][1]["tool_calls"]
    assert sent == [{"id": call.id, "type": "custom", "name": "apply_patch", "arguments": PATCH}]


def test_the_stream_carries_the_call_whole(live: LiveServer) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    body: dict[str, Any] = {
        "model": STUB_MODEL,
        "messages": [{"role": "user", "content": "patch it"}],
        "tools": [APPLY_PATCH],
        "tool_choice": {"type": "custom", "custom": {"name": "apply_patch"}},
    }
    chunks = list(client.chat.completions.create(**body, stream=True))
    calls = [c for chunk in chunks for c in (chunk.choices[0].delta.tool_calls or []) if chunk.choices]
    (call,) = calls
    raw = call.model_dump()
    assert raw["type"] == "custom" and raw["custom"] == {"name": "apply_patch", "input": PATCH} and raw["index"] == 0
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert live.recorded[-1]["tool_choice"] == "function"


def test_the_raw_stream(live: LiveServer) -> None:
    body = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "patch it"}], "tools": [APPLY_PATCH]}
    with httpx.stream("POST", live.v1 + "/chat/completions", json={**body, "stream": True}) as r:
        frames = [json.loads(d) for d in sse.data(r.read()) if d != "[DONE]"]
    (call,) = [c for f in frames for c in f["choices"][0]["delta"].get("tool_calls", [])]
    assert set(call) == {"index", "id", "type", "custom"} and call["custom"]["input"] == PATCH


def test_allowed_tools_in_chats_shape(live: LiveServer) -> None:
    read = {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "read"}}]},
    }
    body = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": [APPLY_PATCH, read]}
    assert (
        httpx.post(live.v1 + "/chat/completions", json={**body, "tool_choice": choice}, timeout=60).status_code == 200
    )
    assert [t["name"] for t in live.recorded[-1]["tools"]] == ["read"]
    stray = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "custom", "custom": {"name": "x"}}]},
    }
    error = httpx.post(live.v1 + "/chat/completions", json={**body, "tool_choice": stray}, timeout=60).json()["error"]
    assert error["param"] == "tool_choice.allowed_tools.tools[0]"


def test_refusals_name_the_field_in_chats_spelling(live: LiveServer) -> None:
    bad = custom_tool("apply_patch", "start: ((", chat=True)
    body = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": [bad]}
    error = httpx.post(live.v1 + "/chat/completions", json=body, timeout=60).json()["error"]
    assert error["param"] == "tools[0].custom.format" and "cannot compile" in error["message"]
    body["tools"] = [{"type": "custom"}]
    error = httpx.post(live.v1 + "/chat/completions", json=body, timeout=60).json()["error"]
    assert error["param"] == "tools[0].custom"
    body["tools"] = [{"type": "custom", "custom": {"name": "bad name"}}]
    error = httpx.post(live.v1 + "/chat/completions", json=body, timeout=60).json()["error"]
    assert error["param"] == "tools[0].custom.name"
    body = {
        "model": STUB_MODEL,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom"}]},
        ],
    }
    error = httpx.post(live.v1 + "/chat/completions", json=body, timeout=60).json()["error"]
    assert error["param"] == "messages[1].tool_calls[0].custom"
