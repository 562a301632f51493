"""Agent memory with the real coding agents: ``serve --stub --memory``, no workspace header.

Each agent declares its working directory in its own prompt (Claude Code's ``Working directory:``,
Codex's ``<cwd>``, pi's ``Current working directory:``); the server must file the memory under that
directory, run the scripted ``memory_set`` itself, and let the agent see only the final text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinytitan.engine.memory.journal import read_journal
from tinytitan.engine.memory.scope import workspace_id

if TYPE_CHECKING:
    from .conftest import Claude, Codex, Pi, StartStub

ANSWER = "Noted: the tests run with make check."
RULES: dict[str, Any] = {
    "rules": [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": ANSWER}},
        {
            "when": {"user_contains": "remember"},
            "reply": {
                "tool_calls": [
                    {"name": "memory_set", "arguments": {"key": "project/test-command", "value": "make check"}}
                ]
            },
        },
        {"reply": {"text": "ok"}},
    ]
}


def _journal(memory: Path, work: Path) -> dict[str, str]:
    found = list(memory.glob(f"tinytitan/*/{workspace_id(str(work))}"))
    assert len(found) == 1, sorted(str(p) for p in memory.rglob("journal.ndjson"))
    return {k: r.value for k, r in read_journal(found[0]).records.items()}


def _memory_calls_reached_the_client(requests: list[dict[str, Any]]) -> bool:
    """Whether any later request carried a memory call back (it would, had the client seen one)."""
    return (
        any(call["name"].startswith("memory_") for r in requests for m in r["messages"] for call in m["tool_calls"])
        and len(requests) > 2
    )


def test_claude_code_memory_in_its_working_directory(stub: StartStub, claude: Claude, tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    server = stub(RULES, "--memory", "--memory-dir", str(memory))
    run = claude.run(server, "remember how the tests run")
    assert run.returncode == 0, run.describe()
    (result,) = [line for line in run.json_lines() if line.get("type") == "result"]
    assert result["result"] == ANSWER and result["num_turns"] == 1, run.describe()
    assert _journal(memory, claude.ws.work) == {"project/test-command": "make check"}
    main = [r for r in server.requests() if "remember" in str(r["messages"])]
    assert str(claude.ws.work) in main[0]["system"] and "# Memory" in main[0]["system"]


def test_codex_memory_in_its_working_directory(stub: StartStub, codex: Codex, tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    server = stub(RULES, "--memory", "--memory-dir", str(memory))
    run = codex.run(server, "remember how the tests run")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == ANSWER, run.describe()
    assert _journal(memory, codex.ws.work) == {"project/test-command": "make check"}
    assert not _memory_calls_reached_the_client(server.requests())


def test_pi_memory_in_its_working_directory(stub: StartStub, pi: Pi, tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    server = stub(RULES, "--memory", "--memory-dir", str(memory))
    run = pi.run(server, "remember how the tests run")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == ANSWER, run.describe()
    assert _journal(memory, pi.ws.work) == {"project/test-command": "make check"}
