"""The scripted coding-agent session the peer benchmarks send (``benchmarks/peer.py``'s ``session``).

A ~2k-token system prompt of rules, 12 tools shaped like a coding agent's, then 3 turns, each adding
a scripted assistant tool call and its tool result, so every server sees the very same prompts.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_NAMES = [
    ("Read", "Read a file from disk.", {"file_path": "string", "offset": "integer", "limit": "integer"}),
    ("Write", "Write a file to the local filesystem, replacing it.", {"file_path": "string", "content": "string"}),
    ("Edit", "Replace an exact string in a file.", {"file_path": "string", "old": "string", "new": "string"}),
    ("Bash", "Run a shell command and return its output.", {"command": "string", "timeout": "integer"}),
    ("Grep", "Search file contents with a regular expression.", {"pattern": "string", "path": "string"}),
    ("Glob", "Find files whose paths match a glob pattern.", {"pattern": "string", "path": "string"}),
    ("LS", "List the entries of a directory.", {"path": "string"}),
    ("WebFetch", "Fetch a URL and return its text.", {"url": "string", "prompt": "string"}),
    ("TodoWrite", "Replace the session's todo list.", {"todos": "array"}),
    ("Task", "Start a sub-agent on a task and return its report.", {"description": "string", "prompt": "string"}),
    ("NotebookEdit", "Edit a cell of a Jupyter notebook.", {"notebook_path": "string", "cell": "integer"}),
    ("MultiEdit", "Apply several edits to one file at once.", {"file_path": "string", "edits": "array"}),
]
RULES = [
    "Read a file before you edit it, and keep edits small and reviewable.",
    "Run the project's tests after every change and report failures exactly as printed.",
    "Never invent file paths: find them with Glob or Grep first.",
    "Prefer the project's existing helpers over new code; match the surrounding style.",
    "Explain a command before running it when it changes files outside the workspace.",
    "Keep answers short: say what changed, where, and how it was checked.",
    "When a tool fails, read its error, fix the cause, and try once more before asking.",
    "Use TodoWrite to plan work of more than three steps and keep the list current.",
]


def tools() -> list[dict[str, Any]]:
    out = []
    for name, description, params in TOOL_NAMES:
        props: dict[str, dict[str, Any]] = {
            p: {"type": t, "description": f"The {p.replace('_', ' ')}."} for p, t in params.items()
        }
        for p, t in params.items():
            if t == "array":
                props[p]["items"] = {"type": "object"}
        schema = {"type": "object", "properties": props, "required": list(params)[:1]}
        out.append({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
    return out


def system_prompt() -> str:
    lines = ["You are a coding agent working in the user's repository. Follow these rules."]
    for section in range(12):
        lines.append(f"\n## Section {section + 1}: working agreement for area {section + 1}")
        lines.extend(f"{section + 1}.{i + 1} {rule}" for i, rule in enumerate(RULES))
    return "\n".join(lines)


def session_turns() -> list[list[dict[str, Any]]]:
    """Three prompts: each turn adds the previous turn's (scripted) call and its result."""
    base: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": "The tests in tests/test_parser.py fail since yesterday. Find out why and fix it."},
    ]
    calls = [
        ("Bash", {"command": "python -m pytest tests/test_parser.py -q"}, "F.F\nFAILED test_parse_empty: KeyError"),
        ("Read", {"file_path": "src/parser.py"}, "def parse(text):\n    return TABLE[text.split()[0]]\n" * 20),
    ]
    turns = [list(base)]
    messages = list(base)
    for i, (name, args, result) in enumerate(calls):
        call_id = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        turns.append(list(messages))
    return turns
