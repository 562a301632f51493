"""Real-model conditions for every client: the first token comes later than twice the keepalive.

On a laptop CPU a coding agent's first turn waits 30-90 s for prefill; meanwhile the server sends
keepalives. Here the stub pauses ``prefill_ms`` before its first token with ``--keepalive 0.5``, so
every stream carries several keepalives before its first event — and every client must still read
the answer (an empty ``data:`` field in the OpenAI keepalive once broke pi and the OpenAI SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tinytitan.testing import sse

from .conftest import MODEL, client_binary

if TYPE_CHECKING:
    from .conftest import Claude, Codex, Pi, StartStub, StubServer, Workspace

KEEPALIVE = "0.5"
PREFILL_MS = 1600  # more than three keepalive intervals
REPLY = "hello after a long prefill"
SCRIPT = {"rules": [{"reply": {"text": REPLY, "prefill_ms": PREFILL_MS}}]}


def _raw(server: StubServer, path: str, body: dict[str, Any]) -> bytes:
    with httpx.stream("POST", server.url + path, json={"model": MODEL, "stream": True, **body}, timeout=60) as r:
        assert r.status_code == 200
        return r.read()


def test_keepalives_are_on_the_wire(stub: StartStub) -> None:
    """What the clients below see before their first event: comment lines on Chat Completions streams
    (no ``data:`` field), a repeated ``response.in_progress`` event on Responses ones (issue 29: Codex
    counts only parsed events), ``event: ping`` on Anthropic ones; lines ending in ``\\n`` only."""
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    chat = _raw(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    responses = _raw(server, "/v1/responses", {"input": "hi"})
    messages = _raw(server, "/v1/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
    assert chat.count(b": ping\n\n") >= 2, chat[:400]
    assert b": ping" not in responses and responses.count(b"event: response.in_progress\n") >= 3, responses[:400]
    for body in (chat, responses):
        assert b"data: \n" not in body and b"\r" not in body
    assert sse.events(messages.decode()).count(("ping", {"type": "ping"})) >= 2 and b"\r" not in messages


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
def test_pi_reads_a_slow_first_token(stub: StartStub, pi: Pi, api: str) -> None:
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    run = pi.run(server, "say hi", api=api)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()


def test_codex_reads_a_slow_first_token(stub: StartStub, codex: Codex) -> None:
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    run = codex.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()


def test_codex_idle_timer_is_reset_by_the_keepalive(stub: StartStub, codex: Codex) -> None:
    """Codex's ``stream_idle_timeout_ms`` (here 1 s) is shorter than the first token's delay (1.6 s):
    only keepalives Codex parses as events keep the turn alive (issue 29 item 1). Retries are off, so
    a timed-out stream fails the run instead of being retried into a pass."""
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    keys: dict[str, str | int | bool] = {"stream_idle_timeout_ms": 1000, "stream_max_retries": 0}
    run = codex.run(server, "say hi", provider_keys=keys)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()
    assert len(server.requests()) == 1  # one stream, never retried


def test_claude_code_reads_a_slow_first_token(stub: StartStub, claude: Claude) -> None:
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    run = claude.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    (result,) = [e for e in run.json_lines() if e.get("type") == "result"]
    assert result["is_error"] is False and result["result"] == REPLY, run.describe()


def test_opencode_reads_a_slow_first_token(stub: StartStub, workspace: Workspace) -> None:
    """OpenCode (wired by ``tinytitan launch``, its AI SDK reading Chat Completions) reads the answer
    after a first token later than three keepalive intervals."""
    client_binary("opencode")
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    env = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    run = workspace.launch("opencode", "--url", server.url, "--", "run", "say hi", env=env)
    assert run.returncode == 0, run.describe()
    assert REPLY in run.stdout, run.describe()
