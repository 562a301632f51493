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

from .conftest import MODEL

if TYPE_CHECKING:
    from .conftest import Claude, Codex, Pi, StartStub, StubServer

KEEPALIVE = "0.5"
PREFILL_MS = 1600  # more than three keepalive intervals
REPLY = "hello after a long prefill"
SCRIPT = {"rules": [{"reply": {"text": REPLY, "prefill_ms": PREFILL_MS}}]}


def _raw(server: StubServer, path: str, body: dict[str, Any]) -> bytes:
    with httpx.stream("POST", server.url + path, json={"model": MODEL, "stream": True, **body}, timeout=60) as r:
        assert r.status_code == 200
        return r.read()


def test_keepalives_are_on_the_wire(stub: StartStub) -> None:
    """What the clients below see before their first event: comment lines on OpenAI streams (no
    ``data:`` field), ``event: ping`` on Anthropic ones, lines ending in ``\\n`` only."""
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    chat = _raw(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    responses = _raw(server, "/v1/responses", {"input": "hi"})
    messages = _raw(server, "/v1/messages", {"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
    for body in (chat, responses):
        assert body.count(b": ping\n\n") >= 2, body[:400]
        assert b"data: \n" not in body and b"\r" not in body
    assert messages.count(b'event: ping\ndata: {"type": "ping"}\n\n') >= 2 and b"\r" not in messages


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


def test_claude_code_reads_a_slow_first_token(stub: StartStub, claude: Claude) -> None:
    server = stub(SCRIPT, "--keepalive", KEEPALIVE)
    run = claude.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    (result,) = [e for e in run.json_lines() if e.get("type") == "result"]
    assert result["is_error"] is False and result["result"] == REPLY, run.describe()
