"""The real Codex CLI with freeform tools (issue 38): its ``apply_patch`` as a custom tool held to its own
Lark grammar, and Code Mode's one ``exec`` tool — wired by ``tinytitan launch codex`` (its model
catalog says ``apply_patch_tool_type: "freeform"``; ``--code-mode`` adds ``tool_mode:
"code_mode_only"``), answered by the scripted backend here and by tiny models in
``test_codex_freeform_models.py``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tinytitan.engine.grammar.freeform import accepts, compile_input
from tinytitan.testing.freeform import grammar

from .conftest import client_binary

if TYPE_CHECKING:
    from .conftest import StartStub, Workspace

BEFORE = 'def greet(name):\n    print("hi " + name)\n'
PATCH = (
    "*** Begin Patch\n"
    "*** Update File: greet.py\n"
    "@@ def greet(name):\n"
    '-    print("hi " + name)\n'
    '+    print(f"hi {name}, \\"quoted\\" \\\\ {{braces}}")\n'
    "*** Add File: notes.txt\n"
    "+written by a freeform call\n"
    "*** End Patch\n"
)
AFTER = 'def greet(name):\n    print(f"hi {name}, \\"quoted\\" \\\\ {{braces}}")\n'
BYPASS = "--dangerously-bypass-approvals-and-sandbox"  # see test_codex.py: no bubblewrap in a CI container


def _rules(tool: str, text: str, done: str) -> list[dict[str, Any]]:
    return [
        {"when": {"last_tool": tool}, "reply": {"text": done}},
        {"when": {"has_tools": True}, "reply": {"tool_calls": [{"name": tool, "input": text}]}},
    ]


def _rules_of(definition: str) -> list[str]:
    """A grammar's lines without comments and blank lines (how Codex embeds its source file)."""
    return [line for line in definition.splitlines() if line.strip() and not line.startswith("#")]


def test_apply_patch_is_a_freeform_call_held_to_codexs_own_grammar(stub: StartStub, workspace: Workspace) -> None:
    client_binary("codex")
    server = stub({"rules": _rules("apply_patch", PATCH, "Patched.")})
    (workspace.work / "greet.py").write_text(BEFORE, encoding="utf-8")
    run = workspace.launch("codex", "--url", server.url, "--", "exec", "--skip-git-repo-check", BYPASS, "fix greet.py")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Patched.", run.describe()
    assert (workspace.work / "greet.py").read_text(encoding="utf-8") == AFTER
    assert (workspace.work / "notes.txt").read_text(encoding="utf-8") == "written by a freeform call\n"

    catalog = json.loads((workspace.home / ".codex" / "tinytitan-models.json").read_text(encoding="utf-8"))
    assert catalog["models"][0]["apply_patch_tool_type"] == "freeform"
    first, second = server.requests()[:2]
    (tool,) = [t for t in first["tools"] if t["name"] == "apply_patch"]
    assert tool["type"] == "custom" and tool["format"]["syntax"] == "lark"
    # what Codex sends is its source's grammar (tinytitan/testing/grammars/SOURCES.md)
    assert _rules_of(tool["format"]["definition"]) == _rules_of(grammar("codex_apply_patch"))
    assert accepts(compile_input("lark", tool["format"]["definition"]).grammar, PATCH)
    call_turn, result_turn = second["messages"][-2:]
    (call,) = call_turn["tool_calls"]
    assert (call["type"], call["name"], call["arguments"]) == ("custom", "apply_patch", PATCH)
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call["id"]
    assert "greet.py" in result_turn["content"]  # Codex's report of the files it changed


def test_code_mode_runs_javascript_through_its_one_exec_tool(stub: StartStub, workspace: Workspace) -> None:
    client_binary("codex")
    code = (
        'await tools.apply_patch("*** Begin Patch\\n*** Add File: made.txt\\n+from code mode\\n*** End Patch\\n");\n'
        'text("made it: " + JSON.stringify({ ok: true }));\n'
    )
    server = stub({"rules": _rules("exec", code, "Ran it.")})
    run = workspace.launch(
        "codex", "--code-mode", "--url", server.url, "--", "exec", "--skip-git-repo-check", BYPASS, "make a file"
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Ran it.", run.describe()
    assert (workspace.work / "made.txt").read_text(encoding="utf-8") == "from code mode\n"
    catalog = json.loads((workspace.home / ".codex" / "tinytitan-models.json").read_text(encoding="utf-8"))
    assert catalog["models"][0]["tool_mode"] == "code_mode_only"
    first, second = server.requests()[:2]
    (tool,) = [t for t in first["tools"] if t["name"] == "exec"]
    assert tool["type"] == "custom" and _rules_of(tool["format"]["definition"]) == _rules_of(grammar("codex_exec"))
    call_turn, result_turn = second["messages"][-2:]
    assert call_turn["tool_calls"][0]["type"] == "custom" and call_turn["tool_calls"][0]["arguments"] == code
    assert 'made it: {"ok":true}' in result_turn["content"]
