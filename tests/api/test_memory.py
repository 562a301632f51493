"""Agent memory over real sockets, on all three protocols (reference §14).

The stub scripts a model that saves a fact (``memory_set``), reads it back (``memory_get``) and then
answers: the client must see only the answer — on every protocol, streaming or not — while the
journal holds the fact, a new server process recalls it, and another workspace sees nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tinytitan.engine.memory.journal import read_journal
from tinytitan.engine.memory.scope import NAMESPACE, workspace_id
from tinytitan.engine.models.stub import raw_reply, stub_tokens
from tinytitan.engine.passes.compaction import HANDOVER_ASK, decode_payload
from tinytitan.engine.request import ChatRequest
from tinytitan.settings import Settings
from tinytitan.testing.process import serve_stub_process
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer

Serve = Callable[..., AbstractContextManager[LiveServer]]
PROTOCOLS = ("chat", "responses", "messages")
ANSWER = "The build command is make -j4."
SET = {"name": "memory_set", "arguments": {"key": "project/build", "value": "make -j4", "importance": 4}}
GET = {"name": "memory_get", "arguments": {"key": "project/build"}}
WRITE = {"name": "Write", "arguments": {"file_path": "/abs/a.txt", "content": "hi"}}
WRITE_TOOL = {"name": "Write", "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": "memory_get"}, "reply": {"text": ANSWER}},
    {"when": {"last_tool": "memory_set"}, "reply": {"tool_calls": [GET]}},
    {"when": {"user_contains": "remember"}, "reply": {"reasoning": "Worth keeping.", "tool_calls": [SET]}},
    {"when": {"user_contains": "mixed"}, "reply": {"tool_calls": [SET, WRITE]}},
    {"when": {"user_contains": "forever"}, "reply": {"tool_calls": [{"name": "memory_list", "arguments": {}}]}},
    {"reply": {"text": "hello"}},
]


@dataclass
class Answer:
    text: str = ""
    calls: list[str] = field(default_factory=list)
    finish: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw: str = ""


def _sse(body: str) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    event: str | None = None
    for line in body.split("\n"):
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
            out.append((event, data if data == "[DONE]" else json.loads(data)))
            event = None
    return out


def _request(protocol: str, text: str, *, stream: bool, tools: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    if protocol == "chat":
        body: dict[str, Any] = {"model": STUB_MODEL, "messages": [{"role": "user", "content": text}], "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [{"type": "function", "function": t} for t in tools]
        return "/v1/chat/completions", body
    if protocol == "responses":
        body = {"model": STUB_MODEL, "input": text, "stream": stream}
        if tools:
            body["tools"] = [{"type": "function", **t} for t in tools]
        return "/v1/responses", body
    body = {"model": STUB_MODEL, "max_tokens": 1000, "messages": [{"role": "user", "content": text}], "stream": stream}
    if tools:
        body["tools"] = [{"name": t["name"], "input_schema": t["parameters"]} for t in tools]
    return "/v1/messages", body


def _chat_answer(obj: dict[str, Any], answer: Answer) -> None:
    message = obj["choices"][0]["message"]
    answer.text = message["content"] or ""
    answer.calls = [c["function"]["name"] for c in message.get("tool_calls", [])]
    answer.finish = obj["choices"][0]["finish_reason"]


def _responses_answer(obj: dict[str, Any], answer: Answer) -> None:
    for item in obj["output"]:
        if item["type"] == "message":
            answer.text += "".join(p["text"] for p in item["content"])
        elif item["type"] == "function_call":
            answer.calls.append(item["name"])
    answer.finish = obj["status"]
    answer.prompt_tokens = obj["usage"]["input_tokens"]
    answer.completion_tokens = obj["usage"]["output_tokens"]


def _messages_answer(obj: dict[str, Any], answer: Answer) -> None:
    answer.text = "".join(b["text"] for b in obj["content"] if b["type"] == "text")
    answer.calls = [b["name"] for b in obj["content"] if b["type"] == "tool_use"]
    answer.finish = obj["stop_reason"]
    usage = obj["usage"]
    answer.prompt_tokens = usage["input_tokens"] + usage["cache_read_input_tokens"]
    answer.completion_tokens = usage["output_tokens"]


def ask(
    url: str,
    protocol: str,
    text: str,
    *,
    stream: bool,
    workspace: Path | None,
    tools: list[dict[str, Any]] | None = None,
) -> Answer:
    path, body = _request(protocol, text, stream=stream, tools=tools or [])
    headers = {"x-tinytitan-workspace": str(workspace)} if workspace else {}
    r = httpx.post(url + path, json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    answer = Answer(raw=r.text)
    if not stream:
        obj = r.json()
        if protocol == "chat":
            _chat_answer(obj, answer)
            answer.prompt_tokens = obj["usage"]["prompt_tokens"]
            answer.completion_tokens = obj["usage"]["completion_tokens"]
        elif protocol == "responses":
            _responses_answer(obj, answer)
        else:
            _messages_answer(obj, answer)
        return answer
    events = _sse(r.text)
    if protocol == "chat":
        for _event, data in events:
            if data == "[DONE]":
                continue
            if data.get("usage"):
                answer.prompt_tokens = data["usage"]["prompt_tokens"]
                answer.completion_tokens = data["usage"]["completion_tokens"]
            for choice in data["choices"]:
                answer.text += choice["delta"].get("content") or ""
                answer.calls += [c["function"]["name"] for c in choice["delta"].get("tool_calls", [])]
                answer.finish = choice["finish_reason"] or answer.finish
    elif protocol == "responses":
        (final,) = [d for e, d in events if e in ("response.completed", "response.incomplete")]
        _responses_answer(final["response"], answer)
        streamed = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
        assert streamed == answer.text
    else:
        for event, data in events:
            if event == "content_block_delta" and data["delta"]["type"] == "text_delta":
                answer.text += data["delta"]["text"]
            elif event == "content_block_start" and data["content_block"]["type"] == "tool_use":
                answer.calls.append(data["content_block"]["name"])
            elif event == "message_start":
                usage = data["message"]["usage"]
            elif event == "message_delta":
                usage = {**usage, **data["usage"]}
                answer.finish = data["delta"]["stop_reason"]
        answer.prompt_tokens = usage["input_tokens"] + usage["cache_read_input_tokens"]
        answer.completion_tokens = usage["output_tokens"]
    return answer


def memory_settings(tmp_path: Path, **extra: Any) -> Settings:
    return Settings(memory=True, memory_dir=str(tmp_path / "memory"), launch_dir=str(tmp_path / "launch"), **extra)


def journal_of(tmp_path: Path, workspace: Path) -> dict[str, str]:
    where = tmp_path / "memory" / NAMESPACE
    (user_dir,) = where.iterdir()
    replay = read_journal(user_dir / workspace_id(str(workspace)))
    return {k: r.value for k, r in replay.records.items()}


def _expected_usage(recorded: list[dict[str, Any]], replies: list[dict[str, Any]]) -> tuple[int, int]:
    prompt = sum(len(stub_tokens(r["prompt"])) for r in recorded)
    completion = sum(len(stub_tokens(raw_reply(reply, thinking=True))) for reply in replies)
    return prompt, completion


@pytest.mark.parametrize("stream", [False, True], ids=["object", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_memory_rounds_are_hidden_and_the_journal_holds_the_record(
    serve: Serve, tmp_path: Path, protocol: str, stream: bool
) -> None:
    workspace = tmp_path / "proj-a"
    with serve(script(*RULES), settings=memory_settings(tmp_path)) as live:
        answer = ask(live.url, protocol, "remember the build command", stream=stream, workspace=workspace)
        recorded = live.recorded
    assert answer.text == ANSWER
    assert answer.calls == []
    assert answer.finish in ("stop", "completed", "end_turn")
    assert "memory_" not in answer.raw  # no call, argument or result reaches the client
    assert len(recorded) == 3
    # the model saw its own calls and their results between rounds
    assert [m["role"] for m in recorded[2]["messages"]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert json.loads(recorded[2]["messages"][-1]["content"])["value"] == "make -j4"
    assert {"memory_set", "memory_get"} <= {t["name"] for t in recorded[0]["tools"]}
    # usage covers every round
    replies = [RULES[2]["reply"], RULES[1]["reply"], RULES[0]["reply"]]
    assert (answer.prompt_tokens, answer.completion_tokens) == _expected_usage(recorded, replies)
    assert journal_of(tmp_path, workspace) == {"project/build": "make -j4"}


def test_a_new_server_process_recalls_it_and_another_workspace_sees_nothing(serve: Serve, tmp_path: Path) -> None:
    workspace, other = tmp_path / "proj-a", tmp_path / "proj-b"
    with serve(script(*RULES), settings=memory_settings(tmp_path)) as live:
        ask(live.url, "chat", "remember the build command", stream=False, workspace=workspace)
    args = ("--memory", "--memory-dir", str(tmp_path / "memory"))
    with serve_stub_process(script(*RULES), *args) as process:
        for where, protocol in ((workspace, "messages"), (other, "responses")):
            ask(process.url, protocol, "hi", stream=False, workspace=where)
        first, second = httpx.get(process.url + "/_stub/requests").json()[-2:]
    assert "project/build [4, " in first["system"] and "make -j4" in first["system"]
    assert str(workspace) in first["system"]
    assert "make -j4" not in second["system"] and "none yet" in second["system"]


@pytest.mark.parametrize("stream", [False, True], ids=["object", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_turn_mixing_memory_and_client_calls_returns_only_the_client_call(
    serve: Serve, tmp_path: Path, protocol: str, stream: bool
) -> None:
    workspace = tmp_path / "proj-a"
    with serve(script(*RULES), settings=memory_settings(tmp_path)) as live:
        answer = ask(live.url, protocol, "mixed", stream=stream, workspace=workspace, tools=[WRITE_TOOL])
        recorded = live.recorded
    assert answer.calls == ["Write"]
    assert answer.finish in ("tool_calls", "completed", "tool_use")
    assert "memory_" not in answer.raw
    assert len(recorded) == 1  # the client's call ends the loop
    names = [t["name"] for t in recorded[0]["tools"]]
    assert names[0] == "Write" and "memory_set" in names[1:]  # memory tools come after the client's
    assert journal_of(tmp_path, workspace) == {"project/build": "make -j4"}  # the memory call still ran


def test_a_second_server_on_the_same_directory_runs_without_persistence_and_says_so(
    serve: Serve, tmp_path: Path
) -> None:
    workspace = tmp_path / "proj-a"
    settings = memory_settings(tmp_path)
    with serve(script(*RULES), settings=settings) as first, serve(script(*RULES), settings=settings) as second:
        ask(first.url, "chat", "hi", stream=False, workspace=workspace)  # the first server holds the journal
        answer = ask(second.url, "messages", "remember the build command", stream=False, workspace=workspace)
        told = second.recorded[0]["system"]
        assert answer.text == ANSWER  # memory still works within the second server
        assert "Another TinyTitan server holds this workspace's memory journal" in told
        assert json.loads(second.recorded[1]["messages"][-1]["content"])["persisted"] is False
        assert "Another TinyTitan server" not in first.recorded[0]["system"]
    assert journal_of(tmp_path, workspace) == {}  # nothing the second server saved reached the disk


def test_count_tokens_excludes_the_memory_fragment_and_tools(serve: Serve, tmp_path: Path) -> None:
    body = {"model": STUB_MODEL, "system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-tinytitan-workspace": str(tmp_path / "proj-a")}
    counts = []
    for settings in (memory_settings(tmp_path), Settings()):
        with serve(script(*RULES), settings=settings) as live:
            r = httpx.post(live.url + "/v1/messages/count_tokens", json=body, headers=headers)
            counts.append(r.json()["input_tokens"])
    assert counts[0] == counts[1]


def test_bad_memory_calls_are_error_results_and_the_request_still_answers(serve: Serve, tmp_path: Path) -> None:
    bad = {"name": "memory_set", "arguments": {"key": "../../etc/passwd", "value": "x" * 70000}}
    rules: list[dict[str, Any]] = [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": "I could not save that."}},
        {"reply": {"tool_calls": [bad]}},
    ]
    with serve(script(*rules), settings=memory_settings(tmp_path)) as live:
        answer = ask(live.url, "responses", "save", stream=True, workspace=tmp_path / "proj-a")
        result = live.recorded[1]["messages"][-1]["content"]
    assert answer.text == "I could not save that." and answer.finish == "completed"
    assert result.startswith("Error: key '../../etc/passwd'")


def test_compaction_passes_get_no_memory_and_carry_the_workspace(serve: Serve, tmp_path: Path) -> None:
    """Issue 28.1: POST /v1/responses/compact on a memory server runs its passes undecorated — no
    fragment, no memory tools, no memory call, no journal — under the caller's workspace header."""
    note = "Next step:\n- add the migration in db/001.sql"
    rules: list[dict[str, Any]] = [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": "Saved and read back."}},
        {"when": {"user_contains": HANDOVER_ASK, "has_tools": True}, "reply": {"tool_calls": [SET]}},
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": note}},
    ]
    workspace = tmp_path / "proj-a"
    body = {"model": STUB_MODEL, "input": [{"role": "user", "content": "remember: the build command is make -j4"}]}
    with serve(script(*rules), settings=memory_settings(tmp_path)) as live:
        seen: list[ChatRequest] = []
        prepare = live.engine.prepare

        async def spy(request: ChatRequest) -> Any:
            seen.append(request)
            return await prepare(request)

        live.engine.prepare = spy  # type: ignore[method-assign]
        r = httpx.post(
            live.url + "/v1/responses/compact", json=body, headers={"x-tinytitan-workspace": str(workspace)}, timeout=60
        )
        recorded = live.recorded
    assert r.status_code == 200, r.text
    (item,) = r.json()["output"]
    assert decode_payload(item["encrypted_content"])["summary"] == note
    assert len(recorded) == 1 and recorded[0]["tools"] == []
    assert "memory" not in (recorded[0]["system"] or "").lower()
    assert [(s.workspace, s.internal) for s in seen] == [(str(workspace), True)]
    assert not [p for p in (tmp_path / "memory").rglob("*") if p.is_file()]  # no journal in any workspace
