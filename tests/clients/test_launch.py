"""``tinytitan launch AGENT`` end to end: each real CLI, wired by the launch alone, answering from the stub.

Every run starts from a HOME that already holds the user's own config for that agent; the launch must
wire the agent (model id, base URL, API key — the stub requires one —, context window, output cap)
and leave those files as they were (or, for pi, keep every entry but its own).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from tinytitan.api.codex_models import BASE_INSTRUCTIONS

from .conftest import StartStub, StubServer, Workspace, client_binary, run_client

REPLY = "hello from tinytitan"
KEY = "launch-secret"
WINDOW = 32768
CAP = WINDOW // 4  # the stub publishes no output cap: the launch gives a quarter of the window


def _server(stub: StartStub) -> StubServer:
    return stub({"context_window": WINDOW, "rules": [{"reply": {"text": REPLY}}]}, "--api-key", KEY)


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def _answered(server: StubServer, key: str | None = KEY) -> list[dict[str, Any]]:
    """What the stub recorded (read with the key it requires)."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    response = httpx.get(server.url + "/_stub/requests", headers=headers, timeout=10)
    response.raise_for_status()
    requests: list[dict[str, Any]] = response.json()
    assert requests, "the agent sent nothing to the stub"
    assert {r["model"] for r in requests} == {server.model}
    return requests


def test_claude(stub: StartStub, workspace: Workspace) -> None:
    client_binary("claude")
    server = _server(stub)
    # settings.json's env overrides the process environment: the launch must win over it anyway
    theirs = {"theme": "dark", "env": {"ANTHROPIC_MODEL": "their-model", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1000"}}
    settings = _write(workspace.home / ".claude" / "settings.json", json.dumps(theirs))
    run = workspace.launch(
        "claude",
        "--url",
        server.url,
        "--api-key",
        KEY,
        "--",
        "-p",
        "say hi",
        "--output-format",
        "json",
    )
    assert run.returncode == 0, run.describe()
    assert json.loads(run.stdout)["result"] == REPLY, run.describe()
    # its answers are capped at the output cap it was given (CLAUDE_CODE_MAX_OUTPUT_TOKENS)
    assert {r["max_new"] for r in _answered(server) if r["tools"]} == {CAP}
    assert (workspace.home / ".claude" / "settings.json").read_text(encoding="utf-8") == settings
    assert not list((workspace.home / ".claude").glob("tinytitan-launch-*"))  # the session's own, removed


def test_codex(stub: StartStub, workspace: Workspace) -> None:
    client_binary("codex")
    server = _server(stub)
    codex_home = workspace.home / ".codex"
    config = _write(
        codex_home / "config.toml",
        'model = "gpt-their-own"\nmodel_reasoning_effort = "low"\n\n'
        '[model_providers.theirs]\nname = "Theirs"\nbase_url = "https://example.invalid/v1"\n',
    )
    run = workspace.launch(
        "codex",
        "--url",
        server.url,
        "--api-key",
        KEY,
        "--",
        "exec",
        "--skip-git-repo-check",
        "say hi",
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()
    assert "Model metadata" not in run.stderr, run.describe()  # it knows the model from the catalog
    (first, *_) = _answered(server)
    # the server's catalog entry: its short instructions, as Codex's own (over 4,000 tokens) would take
    # more than an eighth of a 32k window
    assert first["system"].startswith(BASE_INSTRUCTIONS) and "You are Codex" not in first["system"]
    (entry, *_) = json.loads((codex_home / "tinytitan-models.json").read_text(encoding="utf-8"))["models"]
    assert (entry["slug"], entry["context_window"], entry["auto_compact_token_limit"]) == (
        server.model,
        WINDOW,
        WINDOW - CAP,
    )
    assert (codex_home / "config.toml").read_text(encoding="utf-8") == config


def test_pi(stub: StartStub, workspace: Workspace) -> None:
    client_binary("pi")
    server = _server(stub)
    agent_dir = workspace.home / ".pi" / "agent"
    theirs = {
        "baseUrl": "https://example.invalid/v1",
        "api": "openai-completions",
        "apiKey": "THEIR_KEY",
        "models": [{"id": "x"}],
    }
    _write(agent_dir / "models.json", json.dumps({"providers": {"theirs": theirs}}))
    settings = _write(agent_dir / "settings.json", json.dumps({"defaultThinkingLevel": "low"}))
    run = workspace.launch(
        "pi",
        "--url",
        server.url,
        "--api-key",
        KEY,
        "--",
        "-p",
        "--no-session",
        "say hi",
        env={"PI_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()
    assert {r["max_new"] for r in _answered(server)} == {CAP}  # its model entry's maxTokens
    providers = json.loads((agent_dir / "models.json").read_text(encoding="utf-8"))["providers"]
    assert providers["theirs"] == theirs
    assert providers["tinytitan"]["models"][0]["contextWindow"] == WINDOW
    assert KEY not in (agent_dir / "models.json").read_text(encoding="utf-8")  # the key travels in a variable
    assert (agent_dir / "settings.json").read_text(encoding="utf-8") == settings


def test_opencode(stub: StartStub, workspace: Workspace) -> None:
    client_binary("opencode")
    server = _server(stub)
    theirs = {
        "$schema": "https://opencode.ai/config.json",
        "model": "theirs/x",
        "provider": {
            "theirs": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": "https://example.invalid/v1"},
                "models": {"x": {}},
            }
        },
    }
    config = _write(workspace.home / ".config" / "opencode" / "opencode.json", json.dumps(theirs))
    run = workspace.launch(
        "opencode",
        "--url",
        server.url,
        "--api-key",
        KEY,
        "--",
        "run",
        "say hi",
        env={"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"},
    )
    assert run.returncode == 0, run.describe()
    assert REPLY in run.stdout, run.describe()
    assert {r["max_new"] for r in _answered(server) if r["tools"]} == {CAP}  # limit.output of its model entry
    assert (workspace.home / ".config" / "opencode" / "opencode.json").read_text(encoding="utf-8") == config


def test_reuses_the_local_server(stub: StartStub, workspace: Workspace) -> None:
    """No --url: the server answering on the local port (TINYTITAN_PORT) is the one used."""
    client_binary("pi")
    server = stub({"rules": [{"reply": {"text": REPLY}}]})
    run = workspace.launch(
        "pi",
        "--",
        "-p",
        "--no-session",
        "say hi",
        env={"PI_OFFLINE": "1", "TINYTITAN_PORT": str(server.port)},
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()
    _answered(server, None)


def test_starts_a_server_and_stops_it_when_the_agent_exits(tmp_path: Path, workspace: Workspace) -> None:
    client_binary("pi")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"model": "started-stub", "rules": [{"reply": {"text": REPLY}}]}), encoding="utf-8")
    run = workspace.launch("pi", "--stub", str(script), "--", "-p", "--no-session", "say hi", env={"PI_OFFLINE": "1"})
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()
    (url,) = re.findall(r"starting a server at (http://127\.0\.0\.1:\d+)", run.stderr)
    assert "pi on started-stub" in run.stderr
    try:
        httpx.get(url + "/health", timeout=2)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError(f"the started server still answers at {url}")


def test_the_exit_status_is_the_agents(stub: StartStub, workspace: Workspace) -> None:
    codex = client_binary("codex")
    server = stub({"rules": [{"reply": {"text": REPLY}}]})
    direct = run_client([str(codex), "exec", "--no-such-flag"], env=workspace.base_env(), cwd=workspace.work)
    run = workspace.launch("codex", "--url", server.url, "--", "exec", "--no-such-flag")
    assert direct.returncode != 0, direct.describe()
    assert run.returncode == direct.returncode, run.describe()
