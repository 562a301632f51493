"""A ``tinytitan serve`` group under ``mlx.launch`` (and a one-process twin) for the distributed tests.

``launch_group`` starts ``mlx.launch -n N --backend ring -- python -m tinytitan serve …`` on loopback
and collects every rank's output in a log file; ``serve_model`` starts the same model in one
process, for reference outputs. Both wait until the model answers a request (the weights are loaded).

The launcher runs in a session of its own, and leaving ``launch_group`` stops that whole process
group: ``mlx.launch`` that is itself terminated leaves its ranks running, and an orphaned follower's
ring backend busy-polls a core for as long as it lives (a failed test must not slow every later one).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tinytitan.testing.process import REPO_ROOT, free_port, stop, wait_started

__all__ = ["Launched", "launch_group", "serve_model"]

LAUNCHER = "from mlx._distributed_utils.launch import main; main()"


@dataclass
class Launched:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rank_pid(self, rank: int) -> int:
        """The pid a follower announced in its banner."""
        found = re.search(rf"rank {rank} of \d+ .*\(pid (\d+)\)", self.log)
        if found is None:
            raise LookupError(f"rank {rank} announced no pid")
        return int(found.group(1))

    def wait_for_log(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.log)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                tail = "\n".join(self.log.splitlines()[-15:])
                raise TimeoutError(f"no {pattern!r} in the group's log; its last lines:\n{tail}")
            time.sleep(0.1)


def _wait_ready(url: str, model: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Until one token comes back (the weights are loaded on every rank)."""
    body = {"model": model, "messages": [{"role": "user", "content": "ready?"}], "max_tokens": 1, "temperature": 0}

    def answers() -> bool:
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout).status_code == 200

    wait_started(process, answers, timeout, interval=0.2)


def _serve_args(model_dir: Path, port: int, args: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "tinytitan", "serve", "--model", str(model_dir), "--port", str(port), *args]


@contextmanager
def launch_group(model_dir: Path, *args: str, ranks: int = 2, timeout: float = 300.0) -> Iterator[Launched]:
    """``mlx.launch -n RANKS --backend ring -- tinytitan serve --model MODEL_DIR ARGS…`` on loopback."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "group.log"
        cmd = [
            sys.executable,
            "-c",
            LAUNCHER,
            "-n",
            str(ranks),
            "--backend",
            "ring",
            "--starting-port",
            str(free_port()),
        ]
        cmd += ["--", *_serve_args(model_dir, port, ("--log-level", "info", *args))]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                cmd,
                env=env,
                cwd=str(REPO_ROOT),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        group = Launched(f"http://127.0.0.1:{port}", process, log_path)
        try:
            _wait_ready(group.url, model_dir.name, process, timeout)
            yield group
        finally:
            _stop_group(process, 20)


def _stop_group(launcher: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the launcher and every rank (its process group); SIGKILL what is left after ``grace`` s."""
    group = launcher.pid  # the session leader's pid names the group, even after the leader has exited
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        while time.monotonic() < deadline:
            launcher.poll()  # reap the launcher: a zombie still counts as a member
            os.killpg(group, 0)  # raises once no process of the group is left
            time.sleep(0.1)
        os.killpg(group, signal.SIGKILL)
    stop(launcher, 10)


@contextmanager
def serve_model(model_dir: Path, *args: str, timeout: float = 300.0) -> Iterator[str]:
    """``tinytitan serve --model MODEL_DIR`` in one process; yields its base URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        _serve_args(model_dir, port, ("--log-level", "warning", *args)),
        env=env,
        cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, model_dir.name, process, timeout)
        yield url
    finally:
        stop(process, 20)
