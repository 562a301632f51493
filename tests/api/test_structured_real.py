"""Structured output and forced tool calls on the tiny real model, over HTTP (issue #6).

The model has random weights: whatever it emits is gibberish, so a document that parses and
validates is the grammar's doing. Every schema is bounded (maxLength, maxItems, enums) so the
grammar itself forces the document to end well inside the cap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.testing.server import LiveServer, live_server

CAP = 400
SEEDS_PER_PROTOCOL = 7  # 21 generations per schema feature across the three protocols
OBJECT_CAP = 160  # json_object cannot force an end; a cut document is checked as a prefix
PROTOCOLS = ("chat", "responses", "messages")

NAME = {"type": "string", "maxLength": 8}
SCHEMAS: dict[str, dict[str, Any]] = {
    "nested": {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "name": NAME,
                    "address": {
                        "type": "object",
                        "properties": {"city": NAME},
                        "required": ["city"],
                        "additionalProperties": False,
                    },
                },
                "required": ["name", "address"],
                "additionalProperties": False,
            },
        },
        "required": ["user"],
        "additionalProperties": False,
    },
    "arrays": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": NAME, "minItems": 2, "maxItems": 4},
            "grid": {
                "type": "array",
                "items": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
                "minItems": 1,
                "maxItems": 2,
            },
        },
        "required": ["tags", "grid"],
        "additionalProperties": False,
    },
    "enum": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"enum": [1, 2, None]}},
        "required": ["color", "size"],
        "additionalProperties": False,
    },
    "integers": {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "delta": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 5},
        },
        "required": ["age", "delta"],
        "additionalProperties": False,
    },
    "anyOf": {
        "type": "object",
        "properties": {
            "value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, NAME, {"type": "boolean"}]}
        },
        "required": ["value"],
        "additionalProperties": False,
    },
    "ref": {
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 9},
                    "y": {"type": "integer", "minimum": 0, "maximum": 9},
                },
                "required": ["x", "y"],
                "additionalProperties": False,
            }
        },
        "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
        "required": ["start", "end"],
        "additionalProperties": False,
    },
    "pattern": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"}},
        "required": ["code"],
        "additionalProperties": False,
    },
}

WEATHER = {
    "type": "object",
    "properties": {"city": NAME, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {"query": NAME, "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["query"],
    "additionalProperties": False,
}
TOOLS = {"get_weather": WEATHER, "search": SEARCH}


@pytest.fixture(scope="module")
def live(tiny_dir: Path) -> Iterator[LiveServer]:
    with live_server(MlxBackend(str(tiny_dir))) as server:
        yield server


def post(live: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(live.v1 + path, json={"model": live.engine.info.id, **body}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def structured(
    live: LiveServer, protocol: str, schema: dict[str, Any] | None, seed: int, cap: int = CAP
) -> tuple[str, str]:
    """(the answer text, how it ended) for a JSON request on ``protocol``; ``schema`` None = json_object."""
    user = [{"role": "user", "content": "Describe a thing as JSON."}]
    sampling = {"seed": seed, "temperature": 1.0}
    if protocol == "chat":
        fmt: dict[str, Any] = (
            {"type": "json_object"}
            if schema is None
            else {"type": "json_schema", "json_schema": {"name": "thing", "schema": schema, "strict": True}}
        )
        obj = post(live, "/chat/completions", {"messages": user, "max_tokens": cap, "response_format": fmt, **sampling})
        choice = obj["choices"][0]
        assert obj["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
        return choice["message"]["content"], choice["finish_reason"]
    if protocol == "responses":
        fmt = {"type": "json_object"} if schema is None else {"type": "json_schema", "name": "thing", "schema": schema}
        obj = post(live, "/responses", {"input": user, "max_output_tokens": cap, "text": {"format": fmt}, **sampling})
        texts = [c["text"] for item in obj["output"] if item["type"] == "message" for c in item["content"]]
        assert not [item for item in obj["output"] if item["type"] == "reasoning"]
        return "".join(texts), obj["status"]
    fmt = {"type": "json_object"} if schema is None else {"type": "json_schema", "schema": schema}
    obj = post(
        live, "/messages", {"messages": user, "max_tokens": cap, "output_config": {"format": fmt}, "temperature": 1.0}
    )  # the Messages API has no seed
    assert [b["type"] for b in obj["content"]] == ["text"]
    return obj["content"][0]["text"], obj["stop_reason"]


# -- structured output ------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("feature", sorted(SCHEMAS))
def test_every_schema_feature_yields_a_valid_document(live: LiveServer, feature: str, protocol: str) -> None:
    schema = SCHEMAS[feature]
    for seed in range(SEEDS_PER_PROTOCOL):
        text, ended = structured(live, protocol, schema, seed * 31 + PROTOCOLS.index(protocol))
        assert ended in ("stop", "completed", "end_turn"), (ended, text)
        jsonschema.validate(json.loads(text), schema)


def test_json_object_is_always_an_object(live: LiveServer) -> None:
    """Any object is unbounded (free strings, free keys): random weights may not close it in the cap.

    Every document the model ends is an object; one the cap cuts is reported as such and is still a
    prefix the grammar allows (fed back through llguidance).
    """
    import llguidance

    from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, compile_schema

    backend = live.engine.backend
    assert isinstance(backend, MlxBackend)
    ended = 0
    for seed in range(20):
        protocol = PROTOCOLS[seed % 3]
        text, how = structured(live, protocol, None, 1000 + seed, cap=OBJECT_CAP)
        if how in ("stop", "completed", "end_turn"):
            ended += 1
            assert isinstance(json.loads(text), dict), text
            continue
        assert how in ("length", "incomplete", "max_tokens"), (protocol, how, text)
        matcher = llguidance.LLMatcher(backend.lltokenizer, compile_schema(JSON_OBJECT_SCHEMA, "x"))
        assert matcher.consume_tokens(backend.lltokenizer.tokenize_str(text)), (text, matcher.get_error())
    assert ended >= 1, ended


# -- forced tool calls ------------------------------------------------------------------------------


def chat_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in TOOLS.items()]


def forced_calls(live: LiveServer, protocol: str, choice: str | None, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """The calls in the reply to a request forcing ``choice`` (None = any tool) on ``protocol``."""
    user = [{"role": "user", "content": "What now?"}]
    sampling = {"seed": seed, "temperature": 1.0}
    if protocol == "chat":
        tc: Any = "required" if choice is None else {"type": "function", "function": {"name": choice}}
        obj = post(
            live,
            "/chat/completions",
            {"messages": user, "tools": chat_tools(), "tool_choice": tc, "max_tokens": CAP, **sampling},
        )
        assert obj["choices"][0]["finish_reason"] == "tool_calls"
        calls = obj["choices"][0]["message"]["tool_calls"]
        return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
    if protocol == "responses":
        tools = [{"type": "function", "name": n, "parameters": s} for n, s in TOOLS.items()]
        tc = "required" if choice is None else {"type": "function", "name": choice}
        obj = post(
            live, "/responses", {"input": user, "tools": tools, "tool_choice": tc, "max_output_tokens": CAP, **sampling}
        )
        assert obj["status"] == "completed"
        return [(i["name"], json.loads(i["arguments"])) for i in obj["output"] if i["type"] == "function_call"]
    tools = [{"name": n, "input_schema": s} for n, s in TOOLS.items()]
    tc = {"type": "any"} if choice is None else {"type": "tool", "name": choice}
    obj = post(
        live, "/messages", {"messages": user, "tools": tools, "tool_choice": tc, "max_tokens": CAP, "temperature": 1.0}
    )
    assert obj["stop_reason"] == "tool_use"
    return [(b["name"], b["input"]) for b in obj["content"] if b["type"] == "tool_use"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("choice", [None, "search"])
def test_forced_tool_call_has_the_right_name_and_valid_arguments(
    live: LiveServer, protocol: str, choice: str | None
) -> None:
    for seed in range(4):
        calls = forced_calls(live, protocol, choice, 500 + seed)
        assert len(calls) == 1, calls
        name, arguments = calls[0]
        assert name == choice if choice is not None else name in TOOLS
        jsonschema.validate(arguments, TOOLS[name])


def test_the_model_advertises_forced_tool_calls(live: LiveServer) -> None:
    assert live.engine.info.forced_tool_calls is True
