"""Readiness (issue 25, item 2), against a real ``serve`` process whose scripted model loads slowly.

``/health`` answers 200 all along, ``"status": "loading"`` (with the step) until the weights are in,
then ``"ok"``; ``/ready`` answers 503 until then, 200 after. stderr says what loading does, and the
banner comes once the model is ready — after every progress line.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tinytitan.testing.process import free_port, start_serve, stop, wait_started


def _slow(tmp_path: Path, load_ms: int) -> str:
    stub = tmp_path / "slow.json"
    stub.write_text(json.dumps({"model": "scripted", "load_ms": load_ms, "rules": [{"reply": {"text": "hi"}}]}))
    return str(stub)


def _poll(url: str) -> tuple[int, dict[str, str], int]:
    health = httpx.get(url + "/health", timeout=10)
    ready = httpx.get(url + "/ready", timeout=10)
    return health.status_code, health.json(), ready.status_code


def test_the_readiness_states_in_order_while_a_slow_model_loads(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--stub", _slow(tmp_path, 4000), "--port", str(port))
    seen: list[tuple[int, dict[str, str], int]] = []

    def ready() -> bool:
        seen.append(_poll(url))
        return seen[-1][1]["status"] == "ok"

    try:
        wait_started(proc, ready, 120)
        body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
        assert httpx.post(url + "/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"] == "hi"
        assert httpx.head(url + "/ready").status_code == 200
    finally:
        stop(proc)
    out, err = proc.communicate(timeout=30)
    states = [s[1]["status"] for s in seen]
    assert states[0] == "loading" and states[-1] == "ok"
    assert states == sorted(states, key=["loading", "ok"].index)  # never back to loading
    for health_status, health, ready_status in seen:
        assert health_status == 200
        if health["status"] == "ok":  # /ready is asked just after /health: the weights may come in between
            assert ready_status == 200
    assert (200, {"status": "loading", "step": "loading weights (scripted)"}, 503) in seen
    lines = err.splitlines()
    assert lines[0] == "TinyTitan: loading weights (scripted)…"
    assert lines[1].startswith(f"TinyTitan serving 'scripted' at {url}/v1")  # the banner once ready
    assert "Traceback" not in out + err


def test_a_request_sent_while_loading_waits_for_the_model(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--stub", _slow(tmp_path, 3000), "--port", str(port))
    try:
        wait_started(proc, lambda: _poll(url)[2] == 503, 60)
        body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"
        assert _poll(url)[1] == {"status": "ok"}
    finally:
        stop(proc)


def test_readiness_needs_no_api_key(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"model": "scripted", "rules": []}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--stub", str(stub), "--port", str(port), "--api-key", "k")
    try:
        wait_started(proc, lambda: httpx.get(url + "/ready").status_code == 200, 60)
        assert httpx.get(url + "/health").json() == {"status": "ok"}
        assert httpx.get(url + "/v1/models").status_code == 401
    finally:
        stop(proc)
