"""``tinytitan launch`` tells the truth about the model and cleans up after itself (issue 39.5).

Against a model that cannot call tools and has a small window (the embedded model's 8,192 tokens):
one line says each thing the agent cannot do with it, and the launch refuses (exit 2, unless
``--force``) where the agent's own first prompt cannot fit — with each agent. A Ctrl-C while the
launch starts its own server, while that server loads, or while the agent runs, and a refusal after
the server started, leave no process behind.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from .conftest import BIN, ROOT, StartStub, Workspace, client_binary

REPLY = "hello from tinytitan"
NO_TOOLS_SMALL = {"tool_calls": False, "context_window": 8192, "rules": [{"reply": {"text": REPLY}}]}
AGENT_ARGS = {
    "claude": ["-p", "say hi"],
    "codex": ["exec", "--skip-git-repo-check", "say hi"],
    "pi": ["-p", "--no-session", "say hi"],
    "opencode": ["run", "say hi"],
}


@pytest.mark.parametrize("agent", list(AGENT_ARGS))
def test_each_agent_is_told_what_the_model_cannot_do(stub: StartStub, workspace: Workspace, agent: str) -> None:
    client_binary(agent)
    server = stub(NO_TOOLS_SMALL)
    run = workspace.launch(agent, "--url", server.url, "--", *AGENT_ARGS[agent], env={"PI_OFFLINE": "1"})
    said = [line for line in run.stderr.splitlines() if line.startswith("tinytitan launch: ")]
    assert any("stub-model cannot call tools" in line and "cannot read, run or edit files" in line for line in said)
    if agent == "claude":  # its first prompt alone is larger than the window: refused, nothing sent
        assert run.returncode == 2, run.describe()
        assert "pass --force to launch anyway" in said[-1] and "8,192" in said[-1], said
        assert server.requests() == []
    else:
        assert any("context window is 8,192 tokens" in line for line in said), said
        assert REPLY in run.stdout, run.describe()


def test_force_launches_anyway(stub: StartStub, workspace: Workspace) -> None:
    client_binary("claude")
    server = stub(NO_TOOLS_SMALL)
    run = workspace.launch("claude", "--url", server.url, "--force", "--", "-p", "say hi")
    assert "launching anyway: --force" in run.stderr, run.describe()
    assert "pass --force" not in run.stderr


# -- Ctrl-C ----------------------------------------------------------------------------------------


def _serve_processes(port: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "serve" in cmdline and any(a == "--port" and b == str(port) for a, b in itertools.pairwise(cmdline)):
            found.append(proc)
    return found


def _gone(port: int, within: float = 40) -> None:
    deadline = time.monotonic() + within
    while (left := _serve_processes(port)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in left:  # never leave it to the next test: the assertion below still fails
        proc.kill()
    assert not left, f"a serve process outlived the launch: {[p.pid for p in left]}"


class Launch:
    """``tinytitan launch`` as a terminal runs it (its own process group), read line by line."""

    def __init__(self, workspace: Workspace, *args: str, env: dict[str, str] | None = None) -> None:
        base = workspace.base_env()
        base.update({"PATH": f"{BIN}{os.pathsep}{base['PATH']}", "PYTHONPATH": str(ROOT), **(env or {})})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tinytitan", "launch", *args],
            cwd=workspace.work,
            env=base,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.port: int | None = None

    def until(self, words: str, within: float = 60) -> None:
        """Read stderr until a line holds ``words`` (the launch got that far)."""
        assert self.proc.stderr is not None
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            if found := re.search(r"starting a server at http://127\.0\.0\.1:(\d+)", line):
                self.port = int(found.group(1))
            if words in line:
                return
        raise AssertionError(f"the launch never said {words!r}:\n{''.join(self.lines)}")

    def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # what the terminal does: the whole foreground group
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _script(tmp_path: Path, **reply: Any) -> str:
    path = tmp_path / "script.json"
    body = {"model": "started-stub", "rules": [{"reply": {"text": REPLY, **reply}}]}
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


def test_ctrl_c_while_the_server_starts_stops_it(tmp_path: Path, workspace: Workspace) -> None:
    client_binary("pi")
    launch = Launch(workspace, "pi", "--stub", _script(tmp_path), "--", "-p", "--no-session", "hi")
    launch.until("starting a server at")
    assert launch.ctrl_c() == 130
    assert launch.port is not None
    _gone(launch.port)


def test_ctrl_c_while_the_server_loads_stops_it(tmp_path: Path, workspace: Workspace) -> None:
    client_binary("pi")
    script = tmp_path / "loading.json"
    body = {"model": "started-stub", "load_ms": 120_000, "rules": [{"reply": {"text": REPLY}}]}
    script.write_text(json.dumps(body), encoding="utf-8")
    launch = Launch(workspace, "pi", "--stub", str(script), "--", "-p", "--no-session", "hi")
    launch.until("the server is loading the model")
    assert launch.ctrl_c() == 130
    assert launch.port is not None
    _gone(launch.port)


def test_ctrl_c_while_the_agent_runs_stops_the_server(tmp_path: Path, workspace: Workspace) -> None:
    client_binary("pi")
    script = _script(tmp_path, prefill_ms=120_000)  # the agent waits for a slow first token
    launch = Launch(workspace, "pi", "--stub", script, "--", "-p", "--no-session", "hi", env={"PI_OFFLINE": "1"})
    launch.until("pi on started-stub")
    launch.ctrl_c()
    assert launch.port is not None
    _gone(launch.port)


def test_a_refusal_after_the_server_started_stops_it(tmp_path: Path, workspace: Workspace) -> None:
    client_binary("claude")
    script = tmp_path / "small.json"
    script.write_text(json.dumps({"model": "started-stub", **NO_TOOLS_SMALL}), encoding="utf-8")
    launch = Launch(workspace, "claude", "--stub", str(script), "--", "-p", "hi")
    launch.until("pass --force to launch anyway")
    assert launch.proc.wait(timeout=60) == 2
    assert launch.port is not None
    _gone(launch.port)
