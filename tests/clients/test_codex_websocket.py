"""Codex over the Responses WebSocket (issue 29 item 2): ``supports_websockets = true`` in its provider.

What Codex 0.171 does on the socket (seen in these runs): a ``response.create`` with
``generate: false`` first (a warm-up holding its instructions and tools), then each request with
``previous_response_id`` and only the new items, all with ``store: false`` — so the whole session
stands on the connection-local cache. A refused upgrade falls back to HTTP only on 426.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conftest import Codex, StartStub

WEBSOCKET: dict[str, str | int | bool] = {"supports_websockets": True}
COMMAND = "printf 'written over a socket' > hello.txt"
TOOL_SESSION = {
    "rules": [
        {"when": {"last_role": "tool"}, "reply": {"text": "Created hello.txt."}},
        {
            "when": {"user_contains": "hello.txt"},
            "reply": {
                "reasoning": "Use the shell.",
                "tool_calls": [{"name": "exec_command", "arguments": {"cmd": COMMAND}}],
            },
        },
    ]
}


def _transport(log: str) -> tuple[int, int]:
    """(WebSocket connections accepted, POST /v1/responses requests) in the server's access log."""
    sockets = log.count('"WebSocket /v1/responses" [accepted]')
    posts = log.count('"POST /v1/responses HTTP/1.1"')
    return sockets, posts


def test_a_tool_session_runs_over_the_socket(stub: StartStub, codex: Codex) -> None:
    server = stub(TOOL_SESSION)
    run = codex.run(server, "create hello.txt", "--dangerously-bypass-approvals-and-sandbox", provider_keys=WEBSOCKET)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Created hello.txt.", run.describe()
    assert (codex.ws.work / "hello.txt").read_text() == "written over a socket"
    sockets, posts = _transport(server.access_log())
    assert sockets >= 1 and posts == 0, server.access_log()

    first, second = server.requests()[:2]
    assert first["messages"][-1]["role"] == "user" and "Codex CLI" in first["system"]
    # Codex sent only the tool output the second time: the call and the prompt came from the cache
    call_turn, result_turn = second["messages"][-2:]
    (call,) = call_turn["tool_calls"]
    assert call["name"] == "exec_command" and "hello.txt" in call["arguments"]
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call["id"]
    assert second["messages"][0] == first["messages"][0]  # the whole conversation reached the engine
    assert second["system"] == first["system"]


def test_websocket_mode_off_codex_falls_back_to_http(stub: StartStub, codex: Codex) -> None:
    """``serve --no-websockets`` answers the upgrade with 426, the one refusal Codex falls back on."""
    server = stub({"rules": [{"reply": {"text": "hello over http"}}]}, "--no-websockets")
    run = codex.run(server, "say hi", provider_keys=WEBSOCKET)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "hello over http", run.describe()
    log = server.access_log()
    sockets, posts = _transport(log)
    assert sockets == 0 and posts >= 1, log
    assert '"WebSocket /v1/responses" 426' in log, log


def test_the_idle_timer_survives_a_slow_first_token_on_the_socket(stub: StartStub, codex: Codex) -> None:
    """The keepalive events reach Codex as frames: a 1 s ``stream_idle_timeout_ms`` and a 1.6 s wait."""
    script: dict[str, Any] = {"rules": [{"reply": {"text": "late over a socket", "prefill_ms": 1600}}]}
    server = stub(script, "--keepalive", "0.5")
    keys = {**WEBSOCKET, "stream_idle_timeout_ms": 1000, "stream_max_retries": 0}
    run = codex.run(server, "say hi", provider_keys=keys)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "late over a socket", run.describe()
    assert _transport(server.access_log())[1] == 0, server.access_log()
