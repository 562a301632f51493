"""``tinytitan launch`` as a process: its refusals (one line, exit 2, no traceback), the agent's exit
status, and a started server stopped afterwards — with stand-in agents on PATH (the real CLIs run in
tests/clients/test_launch.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tinytitan.testing.other_server import other_server
from tinytitan.testing.process import REPO_ROOT, ServerProcess, free_port, serve_stub_process
from tinytitan.testing.waiting import wait_until

SCRIPT = {"model": "stub-model", "context_window": 4096, "rules": [{"reply": {"text": "hi"}}]}


def _agent(directory: Path, name: str, code: int = 0) -> None:
    """A stand-in agent: writes its argv and the variables it was given to ``seen.json``, exits ``code``."""
    directory.mkdir(exist_ok=True)
    script = directory / name
    script.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "if sys.argv[1:3] == ['debug', 'models']:\n    sys.exit(0)\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(directory / 'seen.json')!r}, 'w'))\n"
        f"sys.exit({code})\n",
        encoding="utf-8",
    )
    script.chmod(0o755)


def _launch(*args: str, path: Path | None = None, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``tinytitan launch ARGS`` with ``path`` first on PATH; a started server logs under ``home``."""
    env = {
        "TMPDIR": str(home or path or tempfile.gettempdir()),
        "PATH": f"{path}{os.pathsep}/usr/bin:/bin" if path else "/usr/bin:/bin",
        "HOME": str(home or REPO_ROOT / "nonexistent-home"),
        "PYTHONPATH": str(REPO_ROOT),
        "TINYTITAN_PORT": str(free_port()),  # no local server there
    }
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "launch", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _refused(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinytitan launch: ") and words in lines[0], done.stderr


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with serve_stub_process(SCRIPT, "--api-key", "k") as running:
        yield running


def test_unknown_agent() -> None:
    _refused(_launch("cursor"), "unknown agent 'cursor': give one of claude, codex, pi, opencode")


@pytest.mark.parametrize(
    ("agent", "package"),
    [
        ("claude", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
        ("pi", "@mariozechner/pi-coding-agent"),
        ("opencode", "opencode-ai"),
    ],
)
def test_an_agent_not_installed_says_how_to_install_it(agent: str, package: str) -> None:
    _refused(_launch(agent), f"{agent} is not installed (not on PATH); install it with: npm install -g {package}")


def test_a_server_that_does_not_answer(tmp_path: Path) -> None:
    _agent(tmp_path, "claude")
    _refused(_launch("claude", "--url", f"http://127.0.0.1:{free_port()}", path=tmp_path), "no server answers at")


def test_a_url_where_something_else_answers(tmp_path: Path) -> None:
    _agent(tmp_path, "claude")
    with other_server() as url:
        done = _launch("claude", "--url", url, path=tmp_path)
    _refused(done, f"something other than a TinyTitan server answers at {url} (GET /health answered 404)")


def test_a_server_that_wants_a_key(tmp_path: Path, server: ServerProcess) -> None:
    _agent(tmp_path, "claude")
    _refused(_launch("claude", "--url", server.url, path=tmp_path), "wants an API key: pass --api-key")
    _refused(_launch("claude", "--url", server.url, "--api-key", "no", path=tmp_path), "refused the API key given")
    _refused(
        _launch("claude", "--url", server.url, "--model", "nope", "--api-key", "k", path=tmp_path),
        "does not serve 'nope' (it serves: stub-model)",
    )


def test_a_bad_reasoning_level(tmp_path: Path) -> None:
    _agent(tmp_path, "pi")
    _refused(_launch("pi", "--stub", "x.json", "--reasoning", "loud", path=tmp_path), "unknown reasoning level 'loud'")


def test_code_mode_is_codexs_alone(tmp_path: Path) -> None:
    _agent(tmp_path, "pi")
    _refused(_launch("pi", "--code-mode", "--stub", "x.json", path=tmp_path), "--code-mode is for codex only")


def test_a_server_that_cannot_start(tmp_path: Path) -> None:
    _agent(tmp_path, "pi")
    done = _launch("pi", "--stub", str(tmp_path / "missing.json"), path=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    progress, refusal = done.stderr.strip().splitlines()
    assert progress.startswith("tinytitan launch: starting a server at http://127.0.0.1:")
    assert refusal.startswith("tinytitan launch: the server exited with status 2 before it was ready: ")


def test_the_agent_runs_with_its_arguments_and_its_exit_status_is_the_launchs(
    tmp_path: Path, server: ServerProcess
) -> None:
    _agent(tmp_path, "codex", code=7)
    done = _launch(
        "codex",
        "--url",
        server.url,
        "--api-key",
        "k",
        "--reasoning",
        "low",
        "--force",  # a 4,096-token window: the launch would refuse Codex (tests/launch/test_fitness.py)
        "--",
        "exec",
        "--json",
        "do it",
        path=tmp_path,
        home=tmp_path,  # the server's catalog entry is written under it (~/.codex/tinytitan-models.json)
    )
    assert done.returncode == 7, done
    assert "(launching anyway: --force)" in done.stderr
    catalog = json.loads((tmp_path / ".codex" / "tinytitan-models.json").read_text(encoding="utf-8"))
    assert catalog["models"][0]["slug"] == "stub-model"  # the server's own entry, though Codex gave none
    assert f"--reasoning: only for a server started here (with --model or --stub); {server.url}" in done.stderr
    seen = json.loads((tmp_path / "seen.json").read_text(encoding="utf-8"))
    assert seen["argv"][-3:] == ["exec", "--json", "do it"]
    assert "model_context_window=4096" in seen["argv"]
    assert seen["env"]["TINYTITAN_LAUNCH_KEY"] == "k"


def test_a_started_server_is_stopped_after_the_agent(tmp_path: Path) -> None:
    _agent(tmp_path / "bin", "pi")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    done = _launch("pi", "--stub", str(script), path=tmp_path / "bin", home=tmp_path)
    assert done.returncode == 0, done
    seen = json.loads((tmp_path / "bin" / "seen.json").read_text(encoding="utf-8"))
    assert seen["argv"] == ["--provider", "tinytitan", "--model", "stub-model"]
    models = json.loads((tmp_path / ".pi" / "agent" / "models.json").read_text(encoding="utf-8"))
    url = models["providers"]["tinytitan"]["baseUrl"]
    with pytest.raises(httpx.TransportError):
        httpx.get(url.removesuffix("/v1") + "/health", timeout=2)


def test_sigterm_reaches_the_agent_and_the_started_server_is_stopped(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "pi"
    agent.write_text(
        f"#!{sys.executable}\nimport json, os, signal, sys, time\n"
        "def done(signum, frame):\n"
        f"    open({str(tmp_path / 'terminated')!r}, 'w').close()\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, done)\n"
        f"json.dump(sys.argv, open({str(tmp_path / 'started')!r}, 'w'))\n"
        "time.sleep(120)\n",
        encoding="utf-8",
    )
    agent.chmod(0o755)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinytitan", "launch", "pi", "--stub", str(script)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (tmp_path / "started").exists(), limit=60, what="for the agent to start")
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr  # the agent's own status
    assert (tmp_path / "terminated").exists()
    (url,) = re.findall(r"starting a server at (http://127\.0\.0\.1:\d+)", stderr)
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=2)
