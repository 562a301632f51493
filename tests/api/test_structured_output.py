"""Structured output on all three spellings (reference §6): refusals by name, stub checks, thinking off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

UNIQUE = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
RULES = (
    {"when": {"user_contains": "bad"}, "reply": {"text": '{"answer": "forty-two"}'}},
    {"reply": {"reasoning": "hidden", "text": '{"answer": 42}'}},
)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES))) as server:
        yield server


def chat(fmt: dict[str, Any], text: str = "hi") -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {
        "model": STUB_MODEL,
        "messages": [{"role": "user", "content": text}],
        "response_format": fmt,
    }


def responses(fmt: dict[str, Any], text: str = "hi") -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": STUB_MODEL, "input": text, "text": {"format": fmt}}


def messages(fmt: dict[str, Any], text: str = "hi") -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {
        "model": STUB_MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": text}],
        "output_config": {"format": fmt},
    }


REFUSALS = [
    (
        chat({"type": "json_schema", "json_schema": {"name": "x", "schema": UNIQUE}}),
        "response_format.json_schema.schema",
    ),
    (responses({"type": "json_schema", "name": "x", "schema": UNIQUE}), "text.format.schema"),
    (messages({"type": "json_schema", "schema": UNIQUE}), "output_config.format.schema"),
]


@pytest.mark.parametrize(("route", "param"), REFUSALS, ids=["chat", "responses", "messages"])
def test_unsupported_keyword_refused_on_every_spelling(live: LiveServer, route: tuple[str, dict], param: str) -> None:
    path, body = route
    headers = {"anthropic-version": "2023-06-01"} if path == "/v1/messages" else {}
    r = httpx.post(live.url + path, json=body, headers=headers)
    assert r.status_code == 400, r.text
    expected = "JSON Schema keyword 'uniqueItems' at #/properties/tags is not supported"
    if path == "/v1/messages":
        assert r.json()["error"] == {"type": "invalid_request_error", "message": f"{param}: {expected}"}
    else:
        error = r.json()["error"]
        assert (error["code"], error["param"], error["message"]) == ("unsupported_value", param, expected)


def test_valid_schema_served_with_thinking_off(live: LiveServer) -> None:
    path, body = chat({"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}})
    obj = httpx.post(live.url + path, json=body).json()
    assert obj["choices"][0]["message"] == {"role": "assistant", "content": '{"answer": 42}'}
    assert live.recorded[-1]["reasoning_level"] == "off"
    assert live.recorded[-1]["output_format"] == "json_schema"


def test_script_breaking_the_schema_fails_loudly(live: LiveServer) -> None:
    path, body = chat({"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}, text="bad")
    r = httpx.post(live.url + path, json=body)
    assert r.status_code == 500
    assert "breaks the requested schema" in r.json()["error"]["message"]


@pytest.mark.parametrize("fmt", [{"type": "text"}, "json"])
def test_text_and_unrecognised_shapes_stay_plain(live: LiveServer, fmt: Any) -> None:
    path, body = chat(fmt)
    assert httpx.post(live.url + path, json=body).status_code == 200
    assert live.recorded[-1]["output_format"] is None
