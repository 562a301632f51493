"""``tinytitan serve`` and signals (issue 25, item 4), against a real process.

Ctrl-C once: a clean stop, status 0. Ctrl-C twice: one line, status 130, no tracebacks from the
connections it cuts. Ctrl-C while the weights load: the process stops without waiting for the load.
SIGTERM: a clean shutdown, then the process ends by the signal (test_serve.py covers it).
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path

import httpx

from tinytitan.testing.process import free_port, start_serve, wait_started


def _script(tmp_path: Path, script: dict[str, object]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"model": "scripted", **script}))
    return str(path)


def _until_it_stops_listening(port: int) -> None:
    """The first Ctrl-C has been handled once new connections are refused (two at once would merge)."""
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.02)


def test_ctrl_c_twice_stops_at_once_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    slow = _script(tmp_path, {"rules": [{"reply": {"text": "never", "prefill_ms": 120_000}}]})
    port = free_port()
    proc = start_serve("--stub", slow, "--port", str(port), "--keepalive", "0.1")
    url = f"http://127.0.0.1:{port}"
    wait_started(proc, lambda: httpx.get(url + "/ready").status_code == 200, 60)
    opened = threading.Event()
    client: list[str] = []

    def stream() -> None:
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        try:
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line == ": ping":
                        opened.set()
        except httpx.HTTPError as exc:
            client.append(type(exc).__name__)
        opened.set()

    reader = threading.Thread(target=stream)
    reader.start()
    assert opened.wait(60)
    proc.send_signal(signal.SIGINT)  # uvicorn now waits for the open stream ("CTRL+C to force quit")
    _until_it_stops_listening(port)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    reader.join(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == "tinytitan serve: stopped at once (second Ctrl-C); open requests were cut"
    assert sum("stopped at once" in line for line in lines) == 1


def test_ctrl_c_while_the_weights_load_stops_without_waiting_for_them(tmp_path: Path) -> None:
    """The scripted load takes ten minutes; Ctrl-C ends the process (status 0) long before that."""
    slow = _script(tmp_path, {"load_ms": 600_000, "rules": []})
    port = free_port()
    proc = start_serve("--stub", slow, "--port", str(port))
    assert proc.stderr is not None
    assert proc.stderr.readline() == "TinyTitan: loading weights (scripted)…\n"
    wait_started(proc, lambda: httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "loading", 60)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert "Traceback" not in out + err and "TinyTitan serving" not in err  # stopped, never ready


def test_sigterm_while_the_weights_load_ends_by_the_signal(tmp_path: Path) -> None:
    slow = _script(tmp_path, {"load_ms": 600_000, "rules": []})
    port = free_port()
    proc = start_serve("--stub", slow, "--port", str(port))
    wait_started(proc, lambda: httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "loading", 60)
    proc.terminate()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM and "Traceback" not in out + err
