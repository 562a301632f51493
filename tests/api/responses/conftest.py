"""Fixtures for the Responses tests: a live server over a scripted backend, and an SDK client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tinytitan.engine.backends.stub import StubBackend, load_script
from tinytitan.testing.server import LiveServer, live_server

MODEL = "stub-model"

DEFAULT_RULES: list[dict[str, Any]] = [
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


def stub_script(*rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return load_script({"model": MODEL, "rules": list(rules) or DEFAULT_RULES, **extra})


@pytest.fixture
def serve_stub() -> Callable[..., AbstractContextManager[LiveServer]]:
    def start(script: dict[str, Any] | None = None, **kwargs: Any) -> AbstractContextManager[LiveServer]:
        return live_server(StubBackend(script or stub_script()), **kwargs)

    return start


@pytest.fixture
def server(serve_stub: Callable[..., AbstractContextManager[LiveServer]]) -> Iterator[LiveServer]:
    with serve_stub() as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
