"""Slash commands against a real server (the stub backend on a loopback port)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.chat.app import ChatApp
from tinytitan.chat.client import ChatClient, ChatError
from tinytitan.chat.commands import EXIT, is_command, run_command
from tinytitan.chat.connect import Target
from tinytitan.chat.session import DEFAULT_MAX_TOKENS, Session, user_item
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.passes.compaction import HANDOVER_ASK
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

NOTE = "the note"


@pytest.fixture
def server() -> Iterator[LiveServer]:
    rules = ({"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}}, {"reply": {"text": "hi"}})
    with live_server(StubBackend(script(*rules))) as live:
        yield live


@pytest.fixture
def chat(server: LiveServer) -> ChatApp:
    target = Target(ChatClient(server.url), "test", [STUB_MODEL], ("off", "on"))
    return ChatApp(target, Session(STUB_MODEL), interactive=False, tools=False)


def _said(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err  # pipe mode: everything but answers goes to stderr


def test_is_command() -> None:
    assert is_command("/help") and is_command("/system be brief") and is_command("/nosuch")
    assert not is_command("/etc/hosts: what is it?") and not is_command("hello /help") and not is_command("")


def test_help_exit_and_unknown(chat: ChatApp, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_command(chat, "/help") is None and "/compact" in _said(capsys)
    assert run_command(chat, "/exit") == EXIT and run_command(chat, "/bye") == EXIT
    with pytest.raises(ChatError, match="unknown command /nosuch"):
        run_command(chat, "/nosuch")


def test_system_and_clear(chat: ChatApp, capsys: pytest.CaptureFixture[str]) -> None:
    run_command(chat, "/system be brief")
    assert chat.session.instructions == "be brief"
    run_command(chat, "/system")
    assert "system prompt: be brief" in _said(capsys)
    chat.session.items.append(user_item("x"))
    run_command(chat, "/clear")
    assert chat.session.items == [] and chat.session.instructions == "be brief"
    run_command(chat, "/system -")
    assert chat.session.instructions is None


def test_reasoning(chat: ChatApp, capsys: pytest.CaptureFixture[str], server: LiveServer) -> None:
    run_command(chat, "/reasoning")
    assert "this model renders off, on" in _said(capsys)
    run_command(chat, "/reasoning HIGH")
    assert chat.session.reasoning == "high" and "nearest is applied" in _said(capsys)
    run_command(chat, "/reasoning none")
    assert chat.session.reasoning == "off"
    chat._handle("hello")
    assert server.recorded[-1]["reasoning_level"] == "off"
    with pytest.raises(ChatError, match="unknown reasoning level 'loud'"):
        run_command(chat, "/reasoning loud")
    run_command(chat, "/reasoning default")
    assert chat.session.reasoning is None


def test_max_tokens_shows_and_sets_the_cap(
    chat: ChatApp, capsys: pytest.CaptureFixture[str], server: LiveServer
) -> None:
    chat.session.max_output_tokens = DEFAULT_MAX_TOKENS
    run_command(chat, "/max-tokens")
    assert "answers up to 2,048 tokens" in _said(capsys)
    run_command(chat, "/max-tokens 300")
    chat._handle("hello")
    assert chat.session.max_output_tokens == 300 and server.recorded[-1]["max_new"] <= 300
    run_command(chat, "/max-tokens off")
    assert chat.session.max_output_tokens is None and "up to the context window" in _said(capsys)
    with pytest.raises(ChatError, match="a number of tokens or off, not 'lots'"):
        run_command(chat, "/max-tokens lots")


def test_compact_says_what_the_note_holds_and_what_the_passes_did(
    chat: ChatApp, capsys: pytest.CaptureFixture[str]
) -> None:
    chat._handle("hello")
    capsys.readouterr()
    run_command(chat, "/compact")
    first, rest = _said(capsys).split("\n", 1)
    said = " ".join(rest.split())  # the console wraps a long line
    assert first == "compacting…"
    assert said.startswith(f"compacted 2 items into a note of {len(NOTE)} characters, written by the model; ")
    assert " from the prompt cache) and wrote 2 for it" in said and "(model)" not in said


def test_reasoning_on_a_model_without_a_switch(chat: ChatApp, capsys: pytest.CaptureFixture[str]) -> None:
    chat.target.reasoning_levels = ()
    run_command(chat, "/reasoning")
    said = _said(capsys)
    assert "has no reasoning switch" in said and "renders ;" not in said and "renders  " not in said
    run_command(chat, "/reasoning high")
    assert chat.session.reasoning == "high" and "has no reasoning switch" in _said(capsys)
    with pytest.raises(ChatError) as refused:
        run_command(chat, "/reasoning loud")
    assert "one of off, on, minimal, low, medium, high, xhigh, max or default" in str(refused.value)


def test_save_load_and_compact(chat: ChatApp, tmp_path: Path, server: LiveServer) -> None:
    chat._handle("hello")
    path = tmp_path / "s.json"
    run_command(chat, f"/save {path}")
    assert json.loads(path.read_text())["input"] == chat.session.items
    run_command(chat, "/clear")
    run_command(chat, f"/load {path}")
    assert len(chat.session.items) == 2
    run_command(chat, "/compact")
    assert [i["type"] for i in chat.session.items] == ["compaction"]
    chat._handle("go on")
    assert NOTE in server.recorded[-1]["system"]
    with pytest.raises(ChatError, match="needs a file name"):
        run_command(chat, "/save")
    with pytest.raises(ChatError, match="cannot read"):
        run_command(chat, f"/load {tmp_path / 'missing.json'}")


def test_load_keeps_a_model_the_server_does_not_serve(
    chat: ChatApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"model": "elsewhere", "input": [user_item("x")]}))
    run_command(chat, f"/load {path}")
    assert chat.session.model == STUB_MODEL and "does not serve" in _said(capsys)


def test_model(chat: ChatApp, capsys: pytest.CaptureFixture[str]) -> None:
    run_command(chat, "/model")
    assert f"* {STUB_MODEL}" in _said(capsys)
    run_command(chat, f"/model {STUB_MODEL}-fast")  # accepted by the server though not listed
    assert chat.session.model == f"{STUB_MODEL}-fast"
    with pytest.raises(ChatError, match="does not serve 'other'"):
        run_command(chat, "/model other")
