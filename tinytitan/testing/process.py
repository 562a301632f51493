"""``tinytitan serve`` in a child process (fuzzing, load and disconnect checks, restarts).

Unlike ``live_server`` (a thread in the test process) this is the real CLI entry point, so a crash
shows as a dead process and its memory can be measured on its own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "ServerProcess",
    "free_port",
    "serve_process",
    "serve_stub_process",
    "start_serve",
    "stop",
    "wait_healthy",
    "wait_started",
]

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m tinytitan serve ARGS…`` as a user runs it, stdout and stderr piped as text
    (``communicate()`` reads both); ``env`` adds to this process's environment."""
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    cmd = [sys.executable, "-m", "tinytitan", "serve", *args]
    pipe = subprocess.PIPE
    return subprocess.Popen(cmd, env=full, cwd=str(REPO_ROOT), stdout=pipe, stderr=pipe, text=True)


def wait_started(
    process: subprocess.Popen[Any], ready: Callable[[], bool], timeout: float, interval: float = 0.05
) -> None:
    """Poll ``ready`` (a request to the server; a refused connection counts as not yet) until it says
    True; ``RuntimeError`` when the process exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} while starting")
        try:
            if ready():
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not start in time")
        time.sleep(interval)


def wait_healthy(process: subprocess.Popen[bytes], url: str, timeout: float, log: Path | None = None) -> None:
    """``wait_started`` on ``URL/health``; the error carries the server's ``log`` file when given."""
    try:
        wait_started(process, lambda: httpx.get(url + "/health", timeout=2).status_code == 200, timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{log.read_text(errors='replace')}" if log is not None else str(exc)) from None


def stop(process: subprocess.Popen[Any], grace: float = 30.0) -> None:
    """SIGTERM, and SIGKILL when the process has not exited ``grace`` seconds later."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@dataclass
class ServerProcess:
    url: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_bytes(self) -> int:
        """Resident set size of the server process (from /proc; psutil elsewhere)."""
        status = Path(f"/proc/{self.process.pid}/status")
        if status.exists():
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        import psutil  # not Linux: fall back to psutil

        return int(psutil.Process(self.process.pid).memory_info().rss)


@contextmanager
def serve_stub_process(
    stub_script: dict[str, Any], *args: str, startup_timeout: float = 90.0, log_level: str = "warning"
) -> Iterator[ServerProcess]:
    """Run ``python -m tinytitan serve --stub SCRIPT --port P ARGS…`` and wait for ``/health``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(stub_script))
        with serve_process("--stub", str(path), *args, startup_timeout=startup_timeout, log_level=log_level) as server:
            yield server


@contextmanager
def serve_process(
    *args: str, startup_timeout: float = 90.0, log_level: str = "warning", stderr: Path | None = None
) -> Iterator[ServerProcess]:
    """Run ``python -m tinytitan serve --port P ARGS…``, wait for ``/health``; SIGTERM on exit.

    ``stderr``: a file that receives the server's log (else it goes to the test's stderr).
    """
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "tinytitan", "serve", "--port", str(port), "--log-level", log_level, *args]
    err = open(stderr, "ab") if stderr is not None else None  # noqa: SIM115 - closed below
    process = subprocess.Popen(cmd, env=env, cwd=str(REPO_ROOT), stdout=subprocess.DEVNULL, stderr=err)
    server = ServerProcess(f"http://127.0.0.1:{port}", port, process)
    try:
        wait_healthy(process, server.url, startup_timeout, stderr)
        yield server
    finally:
        stop(process)
        if err is not None:
            err.close()
