"""The memory loop: rounds the server runs itself, what the client gets, usage, limits, freezing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tinytitan.engine.events import Event, TextDelta, ToolCall
from tinytitan.engine.memory.records import MAX_VALUE_BYTES
from tinytitan.engine.memory.tools import MEMORY_TOOL_NAMES
from tinytitan.engine.models.stub import raw_reply, stub_tokens
from tinytitan.engine.request import Message, Tool
from tinytitan.testing.loop import run

from .support import complete, memory_engine, request, store_of, stub_of


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


SET = _call("memory_set", key="project/build", value="make -j4", importance=4)
GET = _call("memory_get", key="project/build")
SEQUENCE: list[dict[str, Any]] = [
    {"when": {"last_tool": "memory_get"}, "reply": {"text": "It is make -j4."}},
    {"when": {"last_tool": "memory_set"}, "reply": {"text": "Saved it.", "tool_calls": [GET]}},
    {"reply": {"reasoning": "Keep this.", "text": "Let me note that.", "tool_calls": [SET]}},
]


def test_memory_only_turns_run_on_the_server_and_the_client_gets_text_and_thoughts(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, *SEQUENCE)
    result = complete(engine, request("remember the build"))
    assert result.tool_calls == [] and result.finished.reason == "stop"
    assert result.text == "Let me note that.\n\nSaved it.\n\nIt is make -j4."
    assert result.reasoning == "Keep this."
    assert not any(isinstance(e, ToolCall) for e in result.events)
    recorded = stub_of(engine).recorded
    assert len(recorded) == 3
    second, third = recorded[1]["messages"], recorded[2]["messages"]
    assert second[-2]["content"] == "Let me note that." and second[-2]["tool_calls"][0]["name"] == "memory_set"
    assert json.loads(second[-1]["content"])["saved"] == "project/build"
    assert json.loads(third[-1]["content"])["value"] == "make -j4"
    # every round after the first starts from the same system text and tools (the prefix is reused)
    assert recorded[0]["system"] == recorded[1]["system"] == recorded[2]["system"]
    assert third[-1]["tool_call_id"] == third[-2]["tool_calls"][0]["id"]


def test_usage_covers_every_round(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, *SEQUENCE)
    usage = complete(engine, request("remember the build")).finished.usage
    recorded = stub_of(engine).recorded
    assert usage.prompt_tokens == sum(len(stub_tokens(r["prompt"])) for r in recorded)
    replies = [SEQUENCE[2]["reply"], SEQUENCE[1]["reply"], SEQUENCE[0]["reply"]]
    assert usage.completion_tokens == sum(len(stub_tokens(raw_reply(r, thinking=True))) for r in replies)
    assert usage.reasoning_tokens > 0
    assert usage.cached_tokens > 0  # later rounds share the earlier rounds' prefix


def test_after_the_round_limit_a_last_round_runs_without_memory_tools(tmp_path: Path) -> None:
    rules: list[dict[str, Any]] = [
        {"when": {"has_tools": False}, "reply": {"text": "final answer"}},
        {"reply": {"tool_calls": [_call("memory_list")]}},
    ]
    engine = memory_engine(tmp_path, *rules, memory_tool_rounds=2)
    result = complete(engine, request())
    assert (result.text, result.tool_calls, result.finished.reason) == ("final answer", [], "stop")
    recorded = stub_of(engine).recorded
    assert len(recorded) == 3
    assert [bool(r["tools"]) for r in recorded] == [True, True, False]


def test_a_memory_call_in_the_last_round_is_dropped(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, {"reply": {"text": "still trying", "tool_calls": [SET]}}, memory_tool_rounds=1)
    result = complete(engine, request())
    assert result.tool_calls == [] and result.finished.reason == "stop"
    assert result.text == "still trying\n\nstill trying"
    assert len(stub_of(engine).recorded) == 2


def test_a_turn_with_a_client_call_ends_the_loop_and_returns_only_the_client_calls(tmp_path: Path) -> None:
    write = Tool("Write", parameters={"type": "object", "properties": {"path": {"type": "string"}}})
    rules: list[dict[str, Any]] = [{"reply": {"text": "Writing.", "tool_calls": [SET, _call("Write", path="/a"), GET]}}]
    engine = memory_engine(tmp_path, *rules)
    result = complete(engine, request(tools=(write,)))
    assert [c.name for c in result.tool_calls] == ["Write"] and result.finished.reason == "tool_calls"
    assert result.text == "Writing." and len(stub_of(engine).recorded) == 1
    store = store_of(engine, request(tools=(write,)))
    assert store.get("project/build") is not None  # the memory call beside it still ran


def test_bad_keys_and_oversized_values_are_error_results_the_model_sees(tmp_path: Path) -> None:
    rules: list[dict[str, Any]] = [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": "noted the errors"}},
        {
            "reply": {
                "tool_calls": [
                    _call("memory_set", key="../../etc/passwd", value="x"),
                    _call("memory_set", key="big", value="x" * (MAX_VALUE_BYTES + 1)),
                    _call("memory_set", key="ok", value="fine"),
                ]
            }
        },
    ]
    engine = memory_engine(tmp_path, *rules)
    result = complete(engine, request())
    assert result.text == "noted the errors" and result.finished.reason == "stop"
    results = [m["content"] for m in stub_of(engine).recorded[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Error: key '../../etc/passwd'")
    assert results[1].startswith("Error: value is 65537 bytes")
    assert json.loads(results[2])["saved"] == "ok"


def test_the_output_cap_bounds_all_rounds_together(tmp_path: Path) -> None:
    rules: list[dict[str, Any]] = [{"reply": {"text": "one two three four five", "tool_calls": [_call("memory_list")]}}]
    engine = memory_engine(tmp_path, *rules)
    result = complete(engine, request(max_tokens=40))
    assert result.finished.reason == "length"
    assert result.finished.usage.completion_tokens <= 40


def test_the_fragment_is_frozen_for_the_whole_conversation(tmp_path: Path) -> None:
    engine = memory_engine(
        tmp_path, {"when": {"last_role": "user"}, "reply": {"tool_calls": [SET]}}, {"reply": {"text": "ok"}}
    )
    complete(engine, request("first question", system="sys"))
    frozen = stub_of(engine).recorded[0]["system"]
    assert "none yet" in frozen
    history = (Message("user", "first question"), Message("assistant", "ok"))
    complete(engine, request("second question", system="sys", history=history))
    assert stub_of(engine).recorded[-1]["system"] == frozen  # the saved fact does not change the prefix
    complete(engine, request("a new conversation", system="sys"))
    assert "project/build [4, " in stub_of(engine).recorded[-1]["system"]


def test_records_name_the_conversation_that_wrote_them(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, *SEQUENCE)
    complete(engine, request("remember the build"))
    record = store_of(engine, request()).get("project/build")
    assert record is not None and record.session is not None and record.session.startswith("conv_")


def test_streamed_events_never_include_a_memory_call(tmp_path: Path) -> None:
    engine = memory_engine(tmp_path, *SEQUENCE)

    async def events() -> list[Event]:
        job = await engine.prepare(request("remember"))
        seen = [e async for e in job.events()]
        await asyncio.wait_for(engine.queue.wait_idle(), 30)  # the slot frees once the worker is done
        return seen

    seen = run(events())
    assert not any(isinstance(e, ToolCall) and e.name in MEMORY_TOOL_NAMES for e in seen)
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)).endswith("It is make -j4.")
    assert engine.queue.running == 0 and engine.queue.waiting == 0
