"""The HTTP API's loop policy (issue 26, item 2; ``engine/loops.py``), on all three protocols.

A request without its own cap (none, or one at least the context window, as Claude Code's 32000)
whose generation falls into a verbatim cycle ends as if its cap were hit — Chat ``finish_reason:
"length"``, Responses ``incomplete`` / ``max_output_tokens``, Messages ``stop_reason: "max_tokens"`` —
with one warning in the server's log; the text it got is the model's, unaltered. A request with its
own cap below the window is never cut. The stub backend is scripted to loop.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer

WINDOW = 32768  # the stub's context window
PARAGRAPH = (
    "The lighthouse keeper climbed the stairs again, counted the steps again, and lit the lamp "
    "again while the storm beat on the glass and the gulls cried over the black water below. "
)
LOOPING = PARAGRAPH * 40  # about 7,000 characters: the same paragraph over and over
SCRIPT = script({"reply": {"text": LOOPING}}, context_window=WINDOW)


def ask(
    live: LiveServer, protocol: str, cap: int | None, *, stream: bool = False, headers: dict[str, str] | None = None
) -> tuple[str, str]:
    """The text the client got and its protocol's end reason."""
    message = [{"role": "user", "content": "Write a long story."}]
    if protocol == "chat":
        body: dict[str, Any] = {"model": STUB_MODEL, "messages": message, "stream": stream}
        if cap is not None:
            body["max_tokens"] = cap
        if stream:
            return chat_stream(live, body)
        r = httpx.post(live.v1 + "/chat/completions", json=body, headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        return choice["message"]["content"], choice["finish_reason"]
    if protocol == "responses":
        body = {"model": STUB_MODEL, "input": "Write a long story."}
        if cap is not None:
            body["max_output_tokens"] = cap
        r = httpx.post(live.v1 + "/responses", json=body, headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        obj = r.json()
        text = "".join(p["text"] for item in obj["output"] if item["type"] == "message" for p in item["content"])
        reason = (obj.get("incomplete_details") or {}).get("reason") or obj["status"]
        return text, f"{obj['status']}:{reason}"
    body = {"model": STUB_MODEL, "messages": message, "max_tokens": cap if cap is not None else WINDOW}
    r = httpx.post(live.v1 + "/messages", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    obj = r.json()
    return "".join(b["text"] for b in obj["content"] if b["type"] == "text"), obj["stop_reason"]


def chat_stream(live: LiveServer, body: dict[str, Any]) -> tuple[str, str]:
    text, reason = "", ""
    with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                choice = (json.loads(line[6:]).get("choices") or [{}])[0]
                text += (choice.get("delta") or {}).get("content") or ""
                reason = choice.get("finish_reason") or reason
    return text, reason


CUT = {"chat": "length", "responses": "incomplete:max_output_tokens", "messages": "max_tokens"}
WHOLE = {"chat": "stop", "responses": "completed:completed", "messages": "end_turn"}


@pytest.fixture
def live(serve: Any) -> Any:
    with serve(SCRIPT) as server:
        yield server


def loop_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "verbatim" in r.getMessage()]


@pytest.mark.parametrize("protocol", list(CUT))
@pytest.mark.parametrize("cap", [None, WINDOW, 32000 + WINDOW], ids=["no cap", "the window", "above it"])
def test_a_loop_without_a_cap_of_its_own_ends_as_if_the_cap_were_hit(
    live: LiveServer, protocol: str, cap: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        text, reason = ask(live, protocol, cap)
    assert reason == CUT[protocol]
    assert 3 * len(PARAGRAPH) <= len(text) < len(LOOPING) / 2  # ended early, after three rounds or so
    assert LOOPING.startswith(text)  # what it got is the model's text, unaltered
    (warning,) = loop_warnings(caplog)  # one line in the server's log says why
    assert "as if its output cap were hit" in warning


def test_a_streamed_loop_ends_with_the_same_signal(live: LiveServer) -> None:
    text, reason = ask(live, "chat", None, stream=True)
    assert reason == "length" and LOOPING.startswith(text) and len(text) < len(LOOPING) / 2


@pytest.mark.parametrize("protocol", list(CUT))
def test_a_request_with_its_own_cap_is_never_cut(
    live: LiveServer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        text, reason = ask(live, protocol, WINDOW - 1)
    assert (text, reason) == (LOOPING, WHOLE[protocol])  # the client chose how long it may run
    assert loop_warnings(caplog) == []


@pytest.mark.parametrize("protocol", list(CUT))
def test_a_request_that_asks_for_the_guard_is_watched_under_its_own_cap(
    live: LiveServer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``x-tinytitan-loop-guard: on`` (what ``tinytitan launch`` has every agent send): the cap the
    launch handed over is for planning compaction, so a loop still ends early (issue 39.5)."""
    with caplog.at_level(logging.WARNING):
        text, reason = ask(live, protocol, 2048, headers={"x-tinytitan-loop-guard": "on"})
    assert reason == CUT[protocol] and LOOPING.startswith(text) and len(text) < len(LOOPING) / 2
    assert len(loop_warnings(caplog)) == 1


def test_the_websocket_takes_the_guard_from_its_upgrade(live: LiveServer) -> None:
    from tinytitan.testing.websocket import open_socket

    with open_socket(live.url, headers={"x-tinytitan-loop-guard": "on"}) as ws:
        events = ws.run(model=STUB_MODEL, input="Write a long story.", max_output_tokens=2048)
    final = events[-1]["response"]
    assert final["status"] == "incomplete" and final["incomplete_details"]["reason"] == "max_output_tokens"
