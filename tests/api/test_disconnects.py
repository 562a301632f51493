"""Clients that vanish — mid-stream, while queued, mid-request-body — on every generating route
(reference §1: "client disconnect cancels the generation (or removes the queued request); the slot
is free again at once").

After each, the slot is free (the next request is admitted), the queue counters are back to zero
and nothing leaked: the server loop's tasks and the process' threads return to their baseline.
``benchmarks/disconnect.py`` times disconnect → free slot.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer
from tinytitan.testing.waiting import wait_until

SCRIPT = script(
    {"when": {"user_contains": "slow"}, "reply": {"text": " ".join(["word"] * 400), "chunk_delay_ms": 30}},
    {"reply": {"text": "quick answer"}},
)
ANTHROPIC = {"anthropic-version": "2023-06-01"}
ROUTES: dict[str, tuple[str, Callable[[str, bool], dict[str, Any]], dict[str, str]]] = {
    "chat": (
        "/chat/completions",
        lambda text, stream: {"model": STUB_MODEL, "stream": stream, "messages": [{"role": "user", "content": text}]},
        {},
    ),
    "responses": ("/responses", lambda text, stream: {"model": STUB_MODEL, "stream": stream, "input": text}, {}),
    "messages": (
        "/messages",
        lambda text, stream: {
            "model": STUB_MODEL,
            "stream": stream,
            "max_tokens": 1000,
            "messages": [{"role": "user", "content": text}],
        },
        ANTHROPIC,
    ),
}


def idle(live: LiveServer) -> bool:
    return live.engine.queue.running == 0 and live.engine.queue.waiting == 0


def settled_task_count(live: LiveServer) -> int:
    counts = [live.task_count()]
    while len(counts) < 5 or len(set(counts[-5:])) > 1:  # the same for five looks in a row
        assert len(counts) < 500, f"the server's task count never settled: {counts[-10:]}"
        time.sleep(0.02)
        counts.append(live.task_count())
    return counts[-1]


def own_threads() -> set[str]:
    """Threads alive, minus asyncio's default executor (a bounded pool that grows on demand)."""
    return {t.name for t in threading.enumerate() if not t.name.startswith("asyncio_")}


def served(live: LiveServer, name: str) -> None:
    """The next request is admitted and answered (the slot really is free)."""
    path, body, headers = ROUTES[name]
    r = httpx.post(live.v1 + path, json=body("hi", False), headers=headers, timeout=30)
    assert r.status_code == 200, r.text


def vanish_mid_stream(live: LiveServer, name: str) -> None:
    path, body, headers = ROUTES[name]
    with httpx.stream("POST", live.v1 + path, json=body("slow", True), headers=headers, timeout=30) as r:
        lines = r.iter_lines()  # keep a reference: a dropped iterator closes the connection
        assert next(line for line in lines if "word" in line)  # generating now
        assert live.engine.queue.running == 1


def vanish_while_queued(live: LiveServer, name: str) -> None:
    path, body, headers = ROUTES[name]
    done: list[int] = []

    def first() -> None:
        with httpx.stream("POST", live.v1 + path, json=body("slow", True), headers=headers, timeout=30) as r:
            lines = r.iter_lines()
            next(line for line in lines if "word" in line)
            wait_until(lambda: live.engine.queue.waiting == 0 and bool(done))  # the queued one has left
        done.append(r.status_code)

    holder = threading.Thread(target=first)
    holder.start()
    wait_until(lambda: live.engine.queue.running == 1)
    with httpx.stream("POST", live.v1 + path, json=body("hi", True), headers=headers, timeout=30) as r:
        assert r.status_code == 200
        wait_until(lambda: live.engine.queue.waiting == 1)
    done.append(0)
    holder.join(timeout=30)
    assert not holder.is_alive()


def vanish_mid_body(live: LiveServer, name: str) -> None:
    path, body, _ = ROUTES[name]
    payload = json.dumps(body("hi", False)).encode()
    head = (
        f"POST /v1{path} HTTP/1.1\r\nhost: 127.0.0.1:{live.port}\r\ncontent-type: application/json\r\n"
        f"anthropic-version: 2023-06-01\r\ncontent-length: {len(payload) + 5000}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(head.encode() + payload[: len(payload) // 2])
        time.sleep(0.05)  # let the server start reading the body
    # closed with the body unfinished


SCENARIOS = {"mid_stream": vanish_mid_stream, "while_queued": vanish_while_queued, "mid_body": vanish_mid_body}


@pytest.mark.parametrize("name", list(ROUTES))
def test_vanishing_clients_free_the_slot_and_leak_nothing(
    serve: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(SCRIPT, queue_limit=1) as live:
        for scenario in SCENARIOS.values():  # warm up: thread pools and lazy state exist from here on
            scenario(live, name)
            wait_until(lambda: idle(live))
            served(live, name)
        tasks = settled_task_count(live)  # uvicorn's own, with no request in flight
        threads = own_threads()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                for label, scenario in SCENARIOS.items():
                    scenario(live, name)
                    wait_until(lambda: idle(live), what=f"after {label}: {vars(live.engine.queue)}")
                    served(live, name)
                    wait_until(lambda: idle(live))
        wait_until(lambda: live.task_count() <= tasks)
        assert own_threads() <= threads
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == [], [r.getMessage() for r in errors]
