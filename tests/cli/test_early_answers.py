"""``serve``'s port before the web stack is up: health checks answered, every other request held and
handed to the server once it runs (a request sent while a GGUF file converts waits, as in the backlog)."""

from __future__ import annotations

import json
import threading

import httpx

from tinytitan.api.listen import listen
from tinytitan.cli.early_answers import EarlyAnswers
from tinytitan.testing.waiting import wait_until


def test_health_says_the_step_and_ready_says_not_yet() -> None:
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with sock, EarlyAnswers(sock) as early:
        early.note("converting model.gguf (98 MB) into an MLX model, once")
        health = httpx.get(url + "/health", timeout=10)
        ready = httpx.get(url + "/ready?probe=1", timeout=10)
        head = httpx.head(url + "/health", timeout=10)
    step = {"status": "loading", "step": "converting model.gguf (98 MB) into an MLX model, once"}
    assert (health.status_code, health.json()) == (200, step)
    assert (ready.status_code, ready.json()) == (503, step)
    assert head.status_code == 200 and head.content == b""


def test_any_other_request_waits_for_the_server() -> None:
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    answers: list[httpx.Response] = []
    with sock:
        with EarlyAnswers(sock) as early:
            early.note("loading the tokenizer")
            client = threading.Thread(
                target=lambda: answers.append(httpx.post(url + "/v1/chat/completions", json={"x": 1}, timeout=30))
            )
            client.start()
            wait_until(lambda: early.held == 1, what="for the request to be held")
        assert answers == []  # held, not answered, while the model loads
        conn, _ = sock.accept()  # the server, running now, accepts it from the backlog
        with conn:
            request = b""
            while not request.endswith(b'{"x":1}'):
                request += conn.recv(4096)
            body = json.dumps({"ok": True}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        client.join(timeout=30)
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert answers[0].status_code == 200 and answers[0].json() == {"ok": True}
