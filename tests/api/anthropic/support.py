"""Shared test data for the Messages tests: the stub script, a tool, a request builder."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "CONTEXT",
    "MODEL",
    "SCRIPT",
    "SLOW_TEXT",
    "WEATHER_TOOL",
    "body",
    "frames",
    "script",
    "wait_until",
]

MODEL = "stub-model"
CONTEXT = 16384
SLOW_TEXT = " ".join(f"word{i}" for i in range(200))

SCRIPT: dict[str, Any] = {
    "model": MODEL,
    "context_window": CONTEXT,
    "rules": [
        {"when": {"last_role": "tool"}, "reply": {"text": "It is sunny in Paris."}},
        {
            "when": {"user_contains": "weather"},
            "reply": {
                "reasoning": "I should call the tool.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
        },
        {"when": {"user_contains": "think"}, "reply": {"reasoning": "Two plus two.", "text": "The answer is 4."}},
        {"when": {"user_contains": "json"}, "reply": {"text": '{"answer": 4}'}},
        {"when": {"user_contains": "slow"}, "reply": {"text": SLOW_TEXT, "chunk_delay_ms": 50}},
        {"when": {"user_contains": "fail"}, "reply": {"text": "partial answer then boom", "fail_after_events": 2}},
        {"when": {"user_contains": "count"}, "reply": {"text": "one two three STOP four five"}},
        {"reply": {"text": "hello from tinytitan"}},
    ],
}

WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def script(**overrides: Any) -> dict[str, Any]:
    out = copy.deepcopy(SCRIPT)
    out.update(overrides)
    return out


def body(content: Any = "hi", **fields: Any) -> dict[str, Any]:
    """A minimal valid Messages request; ``fields`` override or add top-level fields."""
    messages = [{"role": "user", "content": content}]
    out: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": messages}
    out.update(fields)
    return out


def frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` per SSE frame."""
    out: list[tuple[str, dict[str, Any]]] = []
    event: str | None = None
    for line in text.splitlines():
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            assert event is not None, "every Messages frame names its event"
            out.append((event, json.loads(line[len("data: ") :])))
            event = None
    return out


def wait_until(condition: Callable[[], bool], *, limit: float = 10.0) -> bool:
    """Poll ``condition`` until it holds (state another thread changes); a bound, not a timing test."""
    stop = threading.Event()
    for _ in range(int(limit / 0.01)):
        if condition():
            return True
        stop.wait(0.01)
    return condition()
