"""Chat Completions over a real socket: objects, SSE framing, keepalive, queue, disconnects (reference §1, §8)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer
from tinytitan.testing.waiting import wait_until

Serve = Callable[..., AbstractContextManager[LiveServer]]
SLOW = {"reply": {"text": " ".join(["word"] * 30), "chunk_delay_ms": 60}}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}


def test_completion_object(server: LiveServer) -> None:
    r = httpx.post(server.v1 + "/chat/completions", json=chat())
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["openai-version"] == "2020-10-01"
    obj = r.json()
    assert obj["object"] == "chat.completion"
    assert obj["id"].startswith("chatcmpl-") and len(obj["id"]) == len("chatcmpl-") + 32
    assert obj["model"] == STUB_MODEL
    choice = obj["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "hello from tinytitan"}
    assert choice["finish_reason"] == "stop"
    usage = obj["usage"]
    assert usage["completion_tokens"] == 3  # hello · from · tinytitan
    assert usage["total_tokens"] == usage["prompt_tokens"] + 3
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}


def test_reasoning_and_tool_calls(serve: Serve) -> None:
    rule = {"reply": {"reasoning": "I should call it.", "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}}
    with serve(script(rule)) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat())
    obj = r.json()
    message = obj["choices"][0]["message"]
    assert obj["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] is None
    assert message["reasoning_content"] == "I should call it."
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"q": "x"}
    assert call["id"].startswith("call_") and len(call["id"]) == 29
    assert 0 < obj["usage"]["completion_tokens_details"]["reasoning_tokens"] < obj["usage"]["completion_tokens"]


def test_thinking_off_drops_scripted_reasoning(serve: Serve) -> None:
    with serve(script({"reply": {"reasoning": "hidden", "text": "answer"}})) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat(chat_template_kwargs={"enable_thinking": False}))
        assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": "answer"}
        assert live.recorded[-1]["reasoning_level"] == "off"


def test_stream_framing_and_usage(server: LiveServer) -> None:
    r = httpx.post(server.v1 + "/chat/completions", json=chat(stream=True, stream_options={"include_usage": True}))
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["openai-version"] == "2020-10-01"
    frames = sse.data(r.text)
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == (
        "hello from tinytitan"
    )
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-2]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_stream_tool_call_chunks(serve: Serve) -> None:
    calls = [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]
    with serve(script({"reply": {"text": "Calling.", "tool_calls": calls}})) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat(stream=True))
    chunks = [json.loads(f) for f in sse.data(r.text)[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    tool_deltas = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert [d["index"] for d in tool_deltas] == [0, 1]
    assert [d["function"]["name"] for d in tool_deltas] == ["a", "b"]
    assert all(d["type"] == "function" and d["id"].startswith("call_") for d in tool_deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_stop_string_across_pieces(serve: Serve) -> None:
    with serve(script({"reply": {"text": "alpha beta END gamma", "chunk_size": 1}})) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat(stop=["ta EN"]))
        obj = r.json()
    assert obj["choices"][0]["message"]["content"] == "alpha be"
    assert obj["choices"][0]["finish_reason"] == "stop"


def test_max_tokens_is_length(server: LiveServer) -> None:
    obj = httpx.post(server.v1 + "/chat/completions", json=chat(max_tokens=2)).json()
    assert obj["choices"][0]["message"]["content"] == "hello from"
    assert obj["choices"][0]["finish_reason"] == "length"
    assert obj["usage"]["completion_tokens"] == 2


def test_mid_stream_failure_sends_error_then_done(serve: Serve) -> None:
    with serve(script({"reply": {"text": "one two three four", "fail_after_events": 2}})) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat(stream=True))
    frames = sse.data(r.text)
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error"
    assert "Traceback" not in r.text


def test_keepalive_ping_while_waiting(serve: Serve) -> None:
    slow = {"reply": {"text": "late answer", "chunk_delay_ms": 700}}
    with serve(script(slow), settings=Settings(keepalive_seconds=0.1)) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=chat(stream=True), timeout=30)
    assert ": ping" in r.text.splitlines()
    assert sse.data(r.text)[-1] == "[DONE]"


def test_models_and_health(server: LiveServer) -> None:
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    assert httpx.head(server.url + "/health").status_code == 200
    models = httpx.get(server.v1 + "/models").json()
    window = server.engine.info.context_window
    entry = {"id": STUB_MODEL, "object": "model", "owned_by": "tinytitan", "input_modalities": ["text"]}
    cap = min(32_000, window // 4)  # an output cap to plan with, not the window (issue 39)
    codex = models.pop("models")  # the same model as Codex's discovery reads it (tests/api/test_codex_models.py)
    assert [m["slug"] for m in codex] == [STUB_MODEL]
    assert models == {"object": "list", "data": [{**entry, "context_window": window, "max_output_tokens": cap}]}
    anthropic = httpx.get(server.v1 + "/models", headers={"anthropic-version": "2023-06-01"})
    assert anthropic.json()["data"][0]["type"] == "model" and anthropic.json()["has_more"] is False
    assert anthropic.headers["request-id"].startswith("req_") and len(anthropic.headers["request-id"]) == 36
    assert httpx.get(server.v1 + f"/models/{STUB_MODEL}-fast").json()["id"] == f"{STUB_MODEL}-fast"
    assert httpx.get(server.v1 + "/models/gpt-4o").status_code == 404
    assert httpx.post(server.v1 + "/models/unload").json() == {"status": "ok", "unloaded": False}


def test_fast_alias_strips_tools_and_guidance(server: LiveServer) -> None:
    body = chat(
        model=f"{STUB_MODEL}-fast",
        messages=[
            {"role": "system", "content": "long guidance"},
            {"role": "user", "content": "<system-reminder>noise</system-reminder>real question"},
        ],
        tools=[{"type": "function", "function": {"name": "f"}}],
    )
    obj = httpx.post(server.v1 + "/chat/completions", json=body).json()
    assert obj["model"] == STUB_MODEL
    seen = server.recorded[-1]
    assert seen["strip_cli"] is True and seen["system"] is None and seen["tools"] == []
    assert seen["messages"][0]["content"] == "real question"


def _stream_in_thread(url: str, body: dict[str, Any], results: list[Any]) -> threading.Thread:
    def run() -> None:
        with httpx.stream("POST", url, json=body, timeout=60) as r:
            results.append((r.status_code, r.read().decode()))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_queue_full_is_429_then_recovers(serve: Serve) -> None:
    with serve(script(SLOW), queue_limit=1) as live:
        url = live.v1 + "/chat/completions"
        results: list[Any] = []
        first = _stream_in_thread(url, chat(stream=True), results)
        wait_until(lambda: live.engine.queue.running == 1)
        second = _stream_in_thread(url, chat(stream=True), results)
        wait_until(lambda: live.engine.queue.waiting == 1)
        r = httpx.post(url, json=chat())
        assert r.status_code == 429
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert r.json()["error"]["code"] == "queue_full"
        assert int(r.headers["retry-after"]) >= 1
        first.join()
        second.join()
        assert [status for status, _ in results] == [200, 200]
        assert all(text.rstrip().endswith("[DONE]") for _, text in results)
        assert httpx.post(url, json=chat(max_tokens=1)).status_code == 200


def test_disconnect_mid_stream_frees_the_slot(serve: Serve) -> None:
    with serve(script(SLOW), queue_limit=0) as live:
        url = live.v1 + "/chat/completions"
        with httpx.stream("POST", url, json=chat(stream=True), timeout=30) as r:
            lines = r.iter_lines()  # keep a reference: a dropped iterator closes the connection
            assert next(line for line in lines if '"word"' in line)  # generating now
            assert live.engine.queue.running == 1
        # the client is gone: the generation stops and the slot frees without waiting for 40 words
        wait_until(lambda: live.engine.queue.running == 0 and live.engine.queue.waiting == 0)
        assert httpx.post(url, json=chat(max_tokens=1)).status_code == 200


def test_disconnect_while_non_streaming_frees_the_slot(serve: Serve) -> None:
    with serve(script(SLOW), queue_limit=0) as live:
        url = live.v1 + "/chat/completions"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json=chat(), timeout=0.5)
        wait_until(lambda: live.engine.queue.running == 0 and live.engine.queue.waiting == 0)
        assert httpx.post(url, json=chat(max_tokens=1)).status_code == 200


def test_disconnect_while_queued_leaves_the_queue(serve: Serve) -> None:
    very_slow = {"reply": {"text": " ".join(["word"] * 50), "chunk_delay_ms": 100}}
    with serve(script(very_slow), queue_limit=1) as live:
        url = live.v1 + "/chat/completions"
        results: list[Any] = []
        first = _stream_in_thread(url, chat(stream=True), results)
        wait_until(lambda: live.engine.queue.running == 1)
        with httpx.stream("POST", url, json=chat(stream=True), timeout=30) as r:
            lines = r.iter_lines()  # keep a reference: a dropped iterator closes the connection
            assert next(line for line in lines if line.startswith("data:"))  # the role chunk, while queued
            assert live.engine.queue.waiting == 1
        wait_until(lambda: live.engine.queue.waiting == 0)
        first.join()
        assert results[0][0] == 200
