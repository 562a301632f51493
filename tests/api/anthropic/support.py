"""Shared test data for the Messages tests: the stub rules, a tool, a request builder."""

from __future__ import annotations

from typing import Any

from anthropic.types import ToolParam

from tinytitan.testing.scripts import STUB_MODEL

__all__ = ["CONTEXT", "MODEL", "RULES", "SLOW_TEXT", "WEATHER_TOOL", "body"]

MODEL = STUB_MODEL
CONTEXT = 16384  # the scripts' context_window
SLOW_TEXT = " ".join(f"word{i}" for i in range(200))

RULES: list[dict[str, Any]] = [
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
]

WEATHER_TOOL: ToolParam = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def body(content: Any = "hi", **fields: Any) -> dict[str, Any]:
    """A minimal valid Messages request; ``fields`` override or add top-level fields."""
    messages = [{"role": "user", "content": content}]
    out: dict[str, Any] = {"model": MODEL, "max_tokens": 1024, "messages": messages}
    out.update(fields)
    return out
