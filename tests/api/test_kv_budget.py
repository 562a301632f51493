"""The KV memory budget (``serve --max-kv-memory``, issue 42) over HTTP, on the scripted backend whose
tokens "take" ``kv_token_bytes`` each: a request whose KV cache would pass the budget beside the running
ones waits in the queue — keepalives flowing — and runs once a running row leaves; one whose prompt could
never fit, even alone, is refused in each protocol's own envelope while the others go on being served;
the budget caps a request's output as the context window does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.waiting import wait_until

TOKEN = 1000  # bytes one token of context "takes"
BUDGET = 300 * TOKEN  # room for one request of ~20 prompt tokens and 200 output tokens, not two
SCRIPT = script(
    {"when": {"user_contains": "slow"}, "reply": {"text": "word " * 5000, "chunk_delay_ms": 200}},  # leaves early
    {"when": {"user_contains": "long"}, "reply": {"text": "word " * 5000, "chunk_delay_ms": 20}},
    {"when": {"user_contains": "endless"}, "reply": {"text": "word " * 5000}},
    {"reply": {"text": "short answer"}},
    kv_token_bytes=TOKEN,
)


@pytest.fixture
def live() -> Iterator[LiveServer]:
    # a manager with slots to spare (a lone stub backend runs one at a time): only memory holds a row back
    settings = Settings(max_kv_memory=BUDGET, max_concurrent=4, queue_limit=4, keepalive_seconds=0.05)
    with live_server(ModelManager.single(StubBackend(SCRIPT)), settings=settings) as server:
        yield server


def chat(text: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"model": STUB_MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, **extra}


def test_a_request_beyond_the_budget_waits_then_runs_when_a_running_one_leaves(live: LiveServer) -> None:
    queue = live.engine.queue
    first_seen, pinged, done = threading.Event(), threading.Event(), threading.Event()
    leave = threading.Event()

    def running() -> None:
        body = chat("a slow one", 200, stream=True)
        with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    first_seen.set()
                if leave.is_set():
                    break  # the client leaves: its row ends and gives its reservation back

    def waiting() -> list[str]:
        events = []
        body = chat("hello", 200, stream=True)
        headers = {"anthropic-version": "2023-06-01"}
        with httpx.stream("POST", live.url + "/v1/messages", json=body, headers=headers, timeout=60) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("event: "):
                    events.append(line[7:])
                    if line == "event: ping" and not done.is_set():
                        pinged.set()
        return events

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(running)
        assert first_seen.wait(30)
        second = pool.submit(waiting)
        wait_until(lambda: queue.waiting == 1, what="the second request never waited")
        assert queue.running == 1 and queue.slots > 1  # a slot was free: it waits for memory
        budget = live.engine.kv_budget
        assert budget is not None and budget.as_json(queue.waiting)["waiting"] == 1
        assert pinged.wait(30)  # keepalives while it waits
        assert not second.done()
        leave.set()
        first.result(timeout=60)
        events = second.result(timeout=60)
        done.set()
    assert events[-1] == "message_stop" and "content_block_delta" in events
    wait_until(lambda: (queue.running, queue.waiting) == (0, 0), what="the queue never emptied")
    assert budget.reserved == 0


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
def test_a_request_that_could_never_fit_is_refused_in_its_protocols_envelope(live: LiveServer, protocol: str) -> None:
    """Refused before it is queued, naming the budget, while a running stream goes on."""
    stream_ok = threading.Event()

    def running() -> str:
        text = []
        body = chat("a long one", 60, stream=True)
        with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    stream_ok.set()
                    choices = json.loads(line[6:])["choices"]
                    text.append((choices[0]["delta"].get("content") if choices else None) or "")
        return "".join(text)

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(running)
        assert stream_ok.wait(30)
        message = refuse(live, protocol)
        assert first.result(timeout=120).count("word") == 60  # the running one went on to its cap
    assert message.removeprefix("messages: ").startswith("the prompt has ")  # (the Anthropic envelope names the field)
    assert "KV memory budget of 293 KiB (--max-kv-memory) holds 300 tokens" in message
    again = httpx.post(live.v1 + "/chat/completions", json=chat("hello", 20), timeout=60)
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "short answer"


LONG_PROMPT = "word " * 400  # 400 tokens and more: over the 300 the budget holds


def refuse(live: LiveServer, protocol: str) -> str:
    """The refusal of a request whose prompt alone would pass the budget, read through the protocol's SDK."""
    if protocol == "messages":
        client = anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(model=STUB_MODEL, max_tokens=10, messages=[{"role": "user", "content": LONG_PROMPT}])
        error = refused.value.body["error"]  # type: ignore[index]
        assert refused.value.status_code == 400 and error["type"] == "invalid_request_error"
        return str(error["message"])
    oai = openai.OpenAI(base_url=live.v1, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as wrong:
        if protocol == "chat":
            oai.chat.completions.create(
                model=STUB_MODEL, max_tokens=10, messages=[{"role": "user", "content": LONG_PROMPT}]
            )
        else:
            oai.responses.create(model=STUB_MODEL, max_output_tokens=10, input=LONG_PROMPT)
    assert wrong.value.status_code == 400 and wrong.value.code == "context_length_exceeded"
    body = wrong.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error"
    return str(body["message"])


def test_the_budget_caps_a_requests_output_as_the_context_window_does(live: LiveServer) -> None:
    """A short prompt asking for more output than the budget holds runs, alone if need be, and ends at
    the budget with the finish reason of a full context window."""
    r = httpx.post(live.v1 + "/chat/completions", json=chat("endless", 1000), timeout=60)
    assert r.status_code == 200, r.text
    answer = r.json()
    usage = answer["usage"]
    assert answer["choices"][0]["finish_reason"] == "length"
    assert usage["prompt_tokens"] + usage["completion_tokens"] == BUDGET // TOKEN
