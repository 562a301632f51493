"""Limits and the 5xx/hangs the fuzzer and probes found, pinned (reference §1, §2, §4).

Every limit answers its named 4xx in the protocol's envelope, and after every refusal the server
is still free: no slot is held, the next request is served.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from tinytitan.engine.request.limits import MAX_SCHEMA_DEPTH, MAX_TOOLS, schema_depth
from tinytitan.settings import HEADER_LIMIT, Settings
from tinytitan.testing.scripts import STUB_MODEL
from tinytitan.testing.server import LiveServer
from tinytitan.testing.waiting import wait_until

USER = {"role": "user", "content": "hi"}
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def nest(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def deep_schema(depth: int) -> dict[str, Any]:
    return {"type": "object", "properties": json.loads(nest(depth - 1))}  # the schema itself is level 1


def post(server: LiveServer, path: str, body: str | dict[str, Any], **headers: str) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(
        server.v1 + path, content=content, headers={"content-type": "application/json", **headers}, timeout=30
    )


def assert_still_free(server: LiveServer) -> None:
    queue = server.engine.queue
    wait_until(lambda: not (queue.running or queue.waiting), limit=10, what="(a refused request kept its slot)")
    ok = post(server, "/chat/completions", {"model": STUB_MODEL, "messages": [USER], "max_tokens": 1})
    assert ok.status_code == 200


def openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert {"message", "type", "code"} <= set(error)
    return error


def anthropic_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    doc = r.json()
    assert doc["type"] == "error" and doc["request_id"].startswith("req_")
    return doc["error"]


# -- found by fuzzing / probing: each was a 500 (or a held slot, i.e. a hang) -----------------------


@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/responses/compact", "/messages"])
def test_json_nested_past_the_decoder_is_invalid_json(server: LiveServer, path: str) -> None:
    """Was a 500: msgspec raises RecursionError (not DecodeError) past the interpreter's limit."""
    body = '{"model":"stub-model","input":' + "[" * 100_000 + "]" * 100_000 + "}"
    r = post(server, path, body)
    if path == "/messages":
        assert anthropic_error(r, 400)["type"] == "invalid_request_error"
    else:
        assert openai_error(r, 400)["code"] == "invalid_json"
    assert_still_free(server)


def test_deeply_nested_tool_call_arguments(server: LiveServer) -> None:
    """Was a 500: json.loads raises RecursionError, which is not a ValueError."""
    deep = "[" * 100_000 + "]" * 100_000
    history = [
        USER,
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    error = openai_error(post(server, "/chat/completions", {"model": STUB_MODEL, "messages": history}), 400)
    assert error["code"] == "invalid_tool_arguments"
    assert error["param"] == "messages[1].tool_calls[0].function.arguments"
    items = [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": deep},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    error = openai_error(post(server, "/responses", {"model": STUB_MODEL, "input": items}), 400)
    assert error["code"] == "invalid_tool_arguments"
    assert_still_free(server)


@pytest.mark.parametrize("stream", [False, True])
def test_echoed_values_nested_near_the_limit_do_not_hold_the_slot(server: LiveServer, stream: bool) -> None:
    """Was a 500 AND a held slot: the Responses encoder deep-copies the echoed request (RecursionError
    after the job was admitted), and the abandoned event stream kept the slot until a GC ran."""
    item = '{"type":"message","role":"user","content":"hi","extra":' + nest(495) + "}"
    body = '{"model":"stub-model","stream":' + json.dumps(stream) + ',"input":[' + item + "]}"
    for _ in range(6):  # more than slots + queue: a leaked slot per request would turn into 429s
        r = post(server, "/responses", body)
        assert r.status_code < 500
    assert_still_free(server)


def test_metadata_must_be_string_valued(server: LiveServer) -> None:
    """Was a 500: deeply nested metadata is echoed into the response object."""
    r = post(server, "/responses", '{"model":"stub-model","input":"hi","metadata":' + nest(495) + "}")
    error = openai_error(r, 400)
    assert error["code"] == "invalid_json" and error["param"].startswith("metadata")
    ok = post(server, "/responses", {"model": STUB_MODEL, "input": "hi", "metadata": {"k": "v"}})
    assert ok.status_code == 200 and ok.json()["metadata"] == {"k": "v"}
    assert_still_free(server)


# -- limits --------------------------------------------------------------------------------------


def test_tool_count_limit(server: LiveServer) -> None:
    def tools(n: int) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": f"t{i}"}} for i in range(n)]

    error = openai_error(
        post(server, "/chat/completions", {"model": STUB_MODEL, "messages": [USER], "tools": tools(MAX_TOOLS + 1)}), 400
    )
    assert error["code"] == "value_too_large" and error["param"] == "tools"
    assert str(MAX_TOOLS) in error["message"]
    ok = post(server, "/chat/completions", {"model": STUB_MODEL, "messages": [USER], "tools": tools(MAX_TOOLS)})
    assert ok.status_code == 200


@pytest.mark.parametrize("path", ["/messages", "/messages/count_tokens"])
def test_tool_count_limit_on_messages(server: LiveServer, path: str) -> None:
    many = [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(MAX_TOOLS + 1)]
    body = {"model": STUB_MODEL, "max_tokens": 5, "messages": [USER], "tools": many}
    error = anthropic_error(post(server, path, body, **ANTHROPIC), 400)
    assert error["message"].startswith("tools: ")


@pytest.mark.parametrize(
    ("path", "body", "param", "anthropic"),
    [
        (
            "/chat/completions",
            {
                "model": STUB_MODEL,
                "messages": [USER],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": "SCHEMA"}}],
            },
            "tools[0].function.parameters",
            False,
        ),
        (
            "/responses",
            {"model": STUB_MODEL, "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": "SCHEMA"}]},
            "tools[0].parameters",
            False,
        ),
        (
            "/messages",
            {
                "model": STUB_MODEL,
                "max_tokens": 5,
                "messages": [USER],
                "tools": [{"name": "f", "input_schema": "SCHEMA"}],
            },
            "tools[0].input_schema",
            True,
        ),
        (
            "/messages/count_tokens",
            {"model": STUB_MODEL, "messages": [USER], "tools": [{"name": "f", "input_schema": "SCHEMA"}]},
            "tools[0].input_schema",
            True,
        ),
        (
            "/chat/completions",
            {
                "model": STUB_MODEL,
                "messages": [USER],
                "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": "SCHEMA"}},
            },
            "response_format.json_schema.schema",
            False,
        ),
        (
            "/responses",
            {
                "model": STUB_MODEL,
                "input": "hi",
                "text": {"format": {"type": "json_schema", "name": "n", "schema": "SCHEMA"}},
            },
            "text.format.schema",
            False,
        ),
    ],
)
def test_schema_depth_limit(server: LiveServer, path: str, body: dict[str, Any], param: str, anthropic: bool) -> None:
    text = json.dumps(body).replace('"SCHEMA"', json.dumps(deep_schema(MAX_SCHEMA_DEPTH + 1)))
    r = post(server, path, text, **(ANTHROPIC if anthropic else {}))
    if anthropic:
        assert anthropic_error(r, 400)["message"].startswith(f"{param}: ")
    else:
        error = openai_error(r, 400)
        assert (error["param"], error["code"]) == (param, "value_too_large")
    assert_still_free(server)


def test_schema_depth_counts_containers() -> None:
    assert schema_depth({}) == 1
    assert schema_depth({"a": [{"b": 1}]}) == 3
    assert schema_depth(deep_schema(MAX_SCHEMA_DEPTH)) == MAX_SCHEMA_DEPTH
    assert schema_depth(json.loads(nest(900))) > MAX_SCHEMA_DEPTH  # no recursion involved


def _raw_response(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(("path", "anthropic"), [("/v1/chat/completions", False), ("/v1/messages", True)])
def test_header_size_limit_is_431_in_the_envelope(server: LiveServer, path: str, anthropic: bool) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: {'a' * (HEADER_LIMIT + 10)}\r\n\r\n"
        sock.sendall(head.encode())
        raw = _raw_response(sock)
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 431")
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    if anthropic:
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["code"] == "request_header_fields_too_large"
    # headers just under the limit are fine
    r = httpx.get(server.v1 + "/models", headers={"x-big": "a" * (HEADER_LIMIT // 2)})
    assert r.status_code == 200


def test_slow_loris_blocks_nobody_and_is_cut_off(serve: Any) -> None:
    with serve(settings=Settings(header_timeout=1.0)) as live:
        lorises = []
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", live.port), timeout=10)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-a: 1\r\n")  # never finished
            lorises.append(sock)
        idle = socket.create_connection(("127.0.0.1", live.port), timeout=10)  # connects, sends nothing
        try:
            r = httpx.post(live.v1 + "/chat/completions", json={"model": STUB_MODEL, "messages": [USER]}, timeout=10)
            assert r.status_code == 200  # served while every slow socket is still open
            for sock in lorises:  # each is answered 408 and closed by the header-read timeout
                raw = _raw_response(sock)
                assert raw.startswith(b"HTTP/1.1 408")
                assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "request_timeout"
            assert _raw_response(idle) == b""  # closed
        finally:
            for sock in [*lorises, idle]:
                sock.close()
