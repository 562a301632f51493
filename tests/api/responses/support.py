"""Stub rules shared by the Responses tests."""

from __future__ import annotations

from typing import Any

from tinytitan.testing.scripts import STUB_MODEL

__all__ = ["MODEL", "RULES"]

MODEL = STUB_MODEL

RULES: list[dict[str, Any]] = [
    {"when": {"last_role": "tool"}, "reply": {"text": "The file is created."}},
    {
        "when": {"user_contains": "two calls"},
        "reply": {
            "text": "Running both.",
            "tool_calls": [
                {"name": "read", "arguments": {"path": "/a.txt"}},
                {"name": "read", "arguments": {"path": "/b.txt"}},
            ],
        },
    },
    {
        "when": {"user_contains": "lookup"},
        "reply": {"text": "", "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
    },
    {
        "when": {"user_contains": "write"},
        "reply": {
            "reasoning": "I should write the file.",
            "tool_calls": [{"name": "Write", "arguments": {"file_path": "/abs/hello.txt", "content": "hi"}}],
        },
    },
    {"when": {"user_contains": "json"}, "reply": {"text": '{"answer": 42}'}},
    {
        "when": {"user_contains": "explode"},
        "reply": {"text": "one two three four five six", "fail_after_events": 3},
    },
    {"reply": {"reasoning": "Thinking it over.", "text": "hello from tinytitan"}},
]
