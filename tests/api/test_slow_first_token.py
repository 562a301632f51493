"""The official SDKs read streams whose first token comes late, alone and several at once.

Real use: a long prefill (30-90 s on a laptop CPU) and agents sending requests side by side, so a
stream waits first in the queue and then for its first token, with keepalives all along. The stub
pauses ``prefill_ms`` before its first token; the keepalive interval is a fraction of that. The
SDKs parse every event strictly (an empty ``data:`` keepalive once made them fail with
JSONDecodeError), and their accumulated result must be the whole answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

KEEPALIVE = 0.2
REPLY = "a slow but whole answer"


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    slow = {"reply": {"reasoning": "Let me think.", "text": REPLY, "prefill_ms": 700, "chunk_size": 2}}
    with live_server(StubBackend(script(slow)), settings=Settings(keepalive_seconds=KEEPALIVE, queue_limit=4)) as s:
        yield s


def openai_chat(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    stream = client.chat.completions.create(model=STUB_MODEL, messages=messages, stream=True)
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def openai_chat_helper(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    with client.chat.completions.stream(model=STUB_MODEL, messages=messages) as stream:
        return stream.get_final_completion().choices[0].message.content or ""


def openai_responses(live: LiveServer) -> str:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    with client.responses.stream(model=STUB_MODEL, input="hi") as stream:
        return stream.get_final_response().output_text


def anthropic_messages(live: LiveServer) -> str:
    client = anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0)
    messages: list[MessageParam] = [{"role": "user", "content": "hi"}]
    with client.messages.stream(model=STUB_MODEL, max_tokens=256, messages=messages) as stream:
        message = stream.get_final_message()
    return "".join(block.text for block in message.content if block.type == "text")


CLIENTS: dict[str, Callable[[LiveServer], str]] = {
    "openai chat stream": openai_chat,
    "openai chat stream helper": openai_chat_helper,
    "openai responses stream": openai_responses,
    "anthropic messages stream": anthropic_messages,
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_an_sdk_reads_a_slow_first_token(live: LiveServer, name: str) -> None:
    assert CLIENTS[name](live) == REPLY


def test_concurrent_slow_streams_all_complete(live: LiveServer) -> None:
    """Four SDK streams at once: three wait in the queue (keepalives) before their own slow prefill."""
    with ThreadPoolExecutor(max_workers=len(CLIENTS)) as pool:
        answers = list(pool.map(lambda call: call(live), CLIENTS.values()))
    assert answers == [REPLY] * len(CLIENTS)
