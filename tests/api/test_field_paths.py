"""Errors name the client's own field, in the client's own spelling, on every protocol.

The mappers give every neutral message, part, tool and tool call the path it came from; the one
validator names its errors with those paths. Each case sends the same mistake in the three
spellings and checks the field the error names (``param`` on OpenAI, the message prefix on
Anthropic).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tinytitan.testing.scripts import STUB_MODEL
from tinytitan.testing.server import LiveServer

USER_CHAT = {"role": "user", "content": "hi"}
USER_MSG = {"role": "user", "content": "hi"}
USER_ITEM = {"type": "message", "role": "user", "content": "hi"}


def chat_call(name: str = "f", arguments: str = "{}") -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        USER_CHAT,
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


def messages_call(name: str = "f", input: Any = None, answers: str = "t1") -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "t1", "name": name, "input": {} if input is None else input}
    result = {"type": "tool_result", "tool_use_id": answers, "content": "ok"}
    return [USER_MSG, {"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def responses_call(name: str = "f", arguments: str = "{}", answers: str = "c1") -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": "c1", "name": name, "arguments": arguments}
    return [USER_ITEM, call, {"type": "function_call_output", "call_id": answers, "output": "ok"}]


# (case, protocol, body fields, the field the error must name)
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("empty call name", "chat", {"messages": chat_call(name="")}, "messages[1].tool_calls[0].function.name"),
    ("empty call name", "messages", {"messages": messages_call(name="")}, "messages[1].content[0].name"),
    ("empty call name", "responses", {"input": responses_call(name="")}, "input[1].name"),
    (
        "arguments not an object",
        "chat",
        {"messages": chat_call(arguments="[1]")},
        "messages[1].tool_calls[0].function.arguments",
    ),
    ("arguments not an object", "messages", {"messages": messages_call(input=[1])}, "messages[1].content[0].input"),
    ("arguments not an object", "responses", {"input": responses_call(arguments="[1]")}, "input[1].arguments"),
    (
        "result for no call",
        "chat",
        {"messages": [USER_CHAT, {"role": "tool", "tool_call_id": "zz", "content": "ok"}]},
        "messages[1].tool_call_id",
    ),
    ("result for no call", "messages", {"messages": messages_call(answers="zz")}, "messages[2].content[0].tool_use_id"),
    ("result for no call", "responses", {"input": responses_call(answers="zz")}, "input[2].call_id"),
    (
        "bad tool name",
        "chat",
        {"messages": [USER_CHAT], "tools": [{"type": "function", "function": {"name": "a b"}}]},
        "tools[0].function.name",
    ),
    ("bad tool name", "messages", {"messages": [USER_MSG], "tools": [{"name": "a b"}]}, "tools[0].name"),
    (
        "bad tool name",
        "responses",
        {
            "input": [USER_ITEM],
            "tools": [{"type": "namespace", "name": "ns", "tools": [{"name": "ok"}, {"name": "a b"}]}],
        },
        "tools[0].tools[1].name",
    ),
    (
        "schema not an object",
        "chat",
        {
            "messages": [USER_CHAT],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
        },
        "tools[0].function.parameters",
    ),
    (
        "schema not an object",
        "messages",
        {"messages": [USER_MSG], "tools": [{"name": "f", "input_schema": {"type": "array"}}]},
        "tools[0].input_schema",
    ),
    (
        "schema not an object",
        "responses",
        {"input": [USER_ITEM], "tools": [{"type": "function", "name": "f", "parameters": {"type": "array"}}]},
        "tools[0].parameters",
    ),
    (
        "unknown format",
        "chat",
        {"messages": [USER_CHAT], "response_format": {"type": "yaml"}},
        "response_format.type",
    ),
    (
        "unknown format",
        "messages",
        {"messages": [USER_MSG], "output_config": {"format": {"type": "yaml"}}},
        "output_config.format.type",
    ),
    ("unknown format", "responses", {"input": [USER_ITEM], "text": {"format": {"type": "yaml"}}}, "text.format.type"),
    (
        "schema missing",
        "messages",
        {"messages": [USER_MSG], "output_config": {"format": {"type": "json_schema"}}},
        "output_config.format.schema",
    ),
    (
        "schema missing",
        "responses",
        {"input": [USER_ITEM], "text": {"format": {"type": "json_schema"}}},
        "text.format.schema",
    ),
    ("cap not positive", "responses", {"input": [USER_ITEM], "max_output_tokens": 0}, "max_output_tokens"),
    ("too many stops", "messages", {"messages": [USER_MSG], "stop_sequences": list("abcde")}, "stop_sequences"),
    ("empty input", "responses", {"input": []}, "input"),
]
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def named_field(protocol: str, response: httpx.Response) -> str:
    """The field an error names: OpenAI's ``param``; Anthropic's ``<field>: `` message prefix."""
    error = response.json()["error"]
    if protocol == "messages":
        return str(error["message"]).split(": ", 1)[0]
    return str(error.get("param"))


@pytest.mark.parametrize(("protocol", "fields", "field"), [c[1:] for c in CASES], ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_an_error_names_the_clients_own_field(
    server: LiveServer, protocol: str, fields: dict[str, Any], field: str
) -> None:
    body = {"model": STUB_MODEL, **fields}
    if protocol == "messages":
        body.setdefault("max_tokens", 64)
    response = httpx.post(server.url + PATHS[protocol], json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert named_field(protocol, response) == field
