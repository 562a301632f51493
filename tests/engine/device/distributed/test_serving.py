"""Two ranks on loopback (mlx.launch, ring) serving the tiny model tensor-parallel (issue #19).

One launched group is shared by the module (starting it loads the model on both ranks); the test that
kills rank 1 comes last. Reference outputs come from the same model served by one process.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tinytitan.testing.distributed import Launched, launch_group, serve_model

pytestmark = pytest.mark.timeout(900)  # the first test also starts both servers (two model loads, a loaded box)

ANTHROPIC = {"anthropic-version": "2023-06-01"}
PROMPTS = ["Tell me about the sea.", "List three colours.", "What is 2 + 2?"]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["answer", "n"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def servers(tiny_dir: Path) -> Iterator[tuple[str, Launched]]:
    with serve_model(tiny_dir) as single, launch_group(tiny_dir) as group:
        yield single, group


def chat(url: str, model: str, content: str | list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
    body = {"model": model, "messages": messages, "max_tokens": 16, "temperature": 0, **extra}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def chat_text(url: str, model: str, content: str, **extra: Any) -> str:
    return str(chat(url, model, content, **extra)["choices"][0]["message"]["content"])


def chat_stream_text(url: str, model: str, content: str) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 16, "temperature": 0}
    body["stream"] = True
    parts = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    parts.append(choice["delta"].get("content") or "")
    return "".join(parts)


def responses_text(url: str, model: str, content: str) -> str:
    body = {"model": model, "input": content, "max_output_tokens": 16, "temperature": 0}
    r = httpx.post(url + "/v1/responses", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return "".join(
        part["text"]
        for item in r.json()["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def messages_text(url: str, model: str, content: str) -> str:
    body = {"model": model, "max_tokens": 16, "temperature": 0, "messages": [{"role": "user", "content": content}]}
    r = httpx.post(url + "/v1/messages", json=body, headers=ANTHROPIC, timeout=300)
    assert r.status_code == 200, r.text
    return "".join(block["text"] for block in r.json()["content"] if block["type"] == "text")


@pytest.mark.parametrize("ask", [chat_text, chat_stream_text, responses_text, messages_text])
def test_greedy_outputs_equal_one_process(servers: tuple[str, Launched], tiny_dir: Path, ask: Any) -> None:
    single, group = servers
    model = tiny_dir.name
    for prompt in PROMPTS:
        expected = ask(single, model, prompt)
        assert expected
        assert ask(group.url, model, prompt) == expected


def test_banner_names_ranks_backend_and_parallelism(servers: tuple[str, Launched]) -> None:
    _single, group = servers
    assert "rank 0 of 2 over ring, tensor parallel" in group.log
    assert "rank 1 of 2 over ring, tensor parallel" in group.log
    assert "up to 1 at once" in group.log  # the group decodes one request at a time
    assert "drafts" not in group.log  # in lockstep, without drafts (one process says it has them)


def test_prompt_cache_and_stop_strings_as_on_one_process(servers: tuple[str, Launched], tiny_dir: Path) -> None:
    single, group = servers
    model = tiny_dir.name
    first = chat(single, model, "Say something long.")["choices"][0]["message"]["content"]
    assert chat(group.url, model, "Say something long.")["choices"][0]["message"]["content"] == first
    turn = [
        {"role": "user", "content": "Say something long."},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "And again."},
    ]
    expected, got = chat(single, model, turn), chat(group.url, model, turn)
    assert got["choices"][0]["message"]["content"] == expected["choices"][0]["message"]["content"]
    assert got["usage"]["prompt_tokens_details"]["cached_tokens"] > 0  # every rank reused its KV shard
    stop = first[len(first) // 2 : len(first) // 2 + 3]
    expected, got = (
        chat(single, model, "Say something long.", stop=[stop]),
        chat(group.url, model, "Say something long.", stop=[stop]),
    )
    assert got["choices"][0]["message"]["content"] == expected["choices"][0]["message"]["content"]
    assert got["choices"][0]["finish_reason"] == "stop"
    assert stop not in got["choices"][0]["message"]["content"]


def test_structured_output_validates(servers: tuple[str, Launched], tiny_dir: Path) -> None:
    single, group = servers
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
    got = chat(group.url, tiny_dir.name, "Answer in JSON.", response_format=fmt, max_tokens=80)
    text = got["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(text), SCHEMA)
    assert (
        text
        == chat(single, tiny_dir.name, "Answer in JSON.", response_format=fmt, max_tokens=80)["choices"][0]["message"][
            "content"
        ]
    )


def test_forced_tool_call(servers: tuple[str, Launched], tiny_dir: Path) -> None:
    tool = {"type": "function", "function": {"name": "pick", "parameters": SCHEMA}}
    got = chat(servers[1].url, tiny_dir.name, "Pick.", tools=[tool], tool_choice="required", max_tokens=80)
    (call,) = got["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "pick"
    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMA)


def test_cancelled_stream_frees_its_slot_on_both_ranks(servers: tuple[str, Launched], tiny_dir: Path) -> None:
    _single, group = servers
    before = group.log.count("left early")
    body = {
        "model": tiny_dir.name,
        "messages": [{"role": "user", "content": "Go on forever."}],
        "max_tokens": 4000,
        "stream": True,
    }
    with httpx.stream("POST", group.v1 + "/chat/completions", json=body, timeout=300) as r:
        seen = 0
        for line in r.iter_lines():
            if line.startswith("data: {"):
                seen += 1
            if seen >= 3:
                break  # the client goes away mid-stream
    group.wait_for_log(r"rank 1: request \d+ left early(?s:.*)" * (before + 1))  # rank 1 ended it too
    assert chat_text(group.url, tiny_dir.name, "Still there?")  # rank 0's slot is free again


def test_killing_rank_1_fails_requests_and_stops_the_group(servers: tuple[str, Launched], tiny_dir: Path) -> None:
    _single, group = servers
    model = tiny_dir.name
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Go on forever."}],
        "max_tokens": 4000,
        "stream": True,
    }
    queued: list[httpx.Response] = []

    def queue_one() -> None:  # a Messages request waiting behind the stream
        payload = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        queued.append(httpx.post(group.v1 + "/messages", json=payload, headers=ANTHROPIC, timeout=300))

    lines: list[str] = []
    with httpx.stream("POST", group.v1 + "/chat/completions", json=body, timeout=300) as r:
        waiter = threading.Thread(target=queue_one)
        stream = r.iter_lines()
        for line in stream:
            lines.append(line)
            if line.startswith("data: {"):
                break
        waiter.start()
        os.kill(group.rank_pid(1), signal.SIGKILL)
        lines.extend(stream)
    waiter.join(300)
    # Rank 0 learns of it from the ring (the group is lost) or from mlx.launch, which sends it SIGTERM
    # as soon as it sees rank 1 die (the server shuts down). Which comes first is a race; either way
    # the stream ends with an error event and [DONE], and the waiting request gets a 503 envelope.
    reasons = {"distributed_group_lost": "distributed group", "server_shutting_down": "shutting down"}
    errors = [json.loads(line[6:])["error"] for line in lines if line.startswith('data: {"error"')]
    assert len(errors) == 1 and reasons[errors[0]["code"]] in errors[0]["message"]
    assert lines[-2:] == ["data: [DONE]", ""]
    (answer,) = queued
    assert answer.status_code == 503 and answer.json()["type"] == "error"
    assert any(reason in answer.json()["error"]["message"] for reason in reasons.values())
    group.process.wait(timeout=300)  # every rank is gone: rank 0 exited, the launcher stopped the rest
