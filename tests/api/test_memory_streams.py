"""Memory rounds under real-model conditions: the official SDKs read streams whose memory rounds are
slow (each round's first token later than twice the keepalive interval), alone and four at once,
and keepalives fill the silence while the server runs memory calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

KEEPALIVE = 0.2
SLOW = 600  # ms before each round's first token
WORKSPACE = "/projects/proj-streams"  # a path string: the server files memory under it, it need not exist
ANSWER = "The build command is make -j4."
SET = {"name": "memory_set", "arguments": {"key": "project/build", "value": "make -j4"}}
GET = {"name": "memory_get", "arguments": {"key": "project/build"}}
RULES: list[dict[str, Any]] = [
    {"when": {"last_tool": "memory_get"}, "reply": {"text": ANSWER, "prefill_ms": SLOW, "chunk_size": 2}},
    {"when": {"last_tool": "memory_set"}, "reply": {"tool_calls": [GET], "prefill_ms": SLOW}},
    {"reply": {"reasoning": "Worth keeping.", "tool_calls": [SET], "prefill_ms": SLOW}},
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("memory")
    settings = Settings(
        keepalive_seconds=KEEPALIVE,
        queue_limit=4,
        memory=True,
        memory_dir=str(tmp / "memory"),
        launch_dir=str(tmp / "launch"),
    )
    with live_server(StubBackend(script(*RULES)), settings=settings) as server:
        yield server


def _headers(live: LiveServer) -> dict[str, str]:
    return {"X-TinyTitan-Workspace": WORKSPACE}


def openai_chat(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0, default_headers=_headers(live))
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "remember the build"}]
    stream = client.chat.completions.create(model=STUB_MODEL, messages=messages, stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def openai_chat_helper(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0, default_headers=_headers(live))
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "remember the build"}]
    with client.chat.completions.stream(model=STUB_MODEL, messages=messages) as stream:
        completion = stream.get_final_completion()
    assert not completion.choices[0].message.tool_calls
    return completion.choices[0].message.content or ""


def openai_responses(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0, default_headers=_headers(live))
    with client.responses.stream(model=STUB_MODEL, input="remember the build") as stream:
        response = stream.get_final_response()
    assert [item.type for item in response.output] == ["reasoning", "message"]
    return response.output_text


def anthropic_messages(live: LiveServer) -> str:
    client = anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0, default_headers=_headers(live))
    messages: list[MessageParam] = [{"role": "user", "content": "remember the build"}]
    with client.messages.stream(model=STUB_MODEL, max_tokens=512, messages=messages) as stream:
        message = stream.get_final_message()
    assert [block.type for block in message.content] == ["thinking", "text"] and message.stop_reason == "end_turn"
    return "".join(block.text for block in message.content if block.type == "text")


CLIENTS: dict[str, Callable[[LiveServer], str]] = {
    "openai chat stream": openai_chat,
    "openai chat stream helper": openai_chat_helper,
    "openai responses stream": openai_responses,
    "anthropic messages stream": anthropic_messages,
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_an_sdk_reads_a_stream_with_slow_memory_rounds(live: LiveServer, name: str) -> None:
    assert CLIENTS[name](live) == ANSWER


def test_concurrent_memory_streams_all_complete(live: LiveServer) -> None:
    with ThreadPoolExecutor(max_workers=len(CLIENTS)) as pool:
        answers = list(pool.map(lambda call: call(live), CLIENTS.values()))
    assert answers == [ANSWER] * len(CLIENTS)


@pytest.mark.parametrize(("path", "anthropic_api"), [("/v1/chat/completions", False), ("/v1/messages", True)])
def test_keepalives_flow_while_the_server_runs_memory_rounds(live: LiveServer, path: str, anthropic_api: bool) -> None:
    body = {
        "model": STUB_MODEL,
        "max_tokens": 512,
        "stream": True,
        "messages": [{"role": "user", "content": "remember the build"}],
    }
    with httpx.stream("POST", live.url + path, json=body, headers=_headers(live), timeout=60) as r:
        lines = [line for line in r.iter_lines() if line]
    ping = "event: ping" if anthropic_api else ": ping"
    thought = max(i for i, line in enumerate(lines) if "keeping" in line)  # round 1's thought, token by token
    answer = min(i for i, line in enumerate(lines) if '"The' in line)  # round 3's text
    # after round 1's thought, nothing but keepalives until round 3's text
    assert ping in lines[thought + 1 : answer]
    assert "memory_" not in "\n".join(lines)
