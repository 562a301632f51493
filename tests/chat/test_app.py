"""The pipe loop: one message per line, answers only, exit status 0 / 1 / 2."""

from __future__ import annotations

import io

import pytest

from tinytitan.chat.app import ChatApp
from tinytitan.chat.client import ChatClient
from tinytitan.chat.connect import Target
from tinytitan.chat.session import Session
from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.process import free_port
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import live_server


def _app(url: str, tools: bool = False) -> ChatApp:
    return ChatApp(Target(ChatClient(url), "test", [STUB_MODEL]), Session(STUB_MODEL), interactive=False, tools=tools)


def test_pipe_loop_answers_each_line(capsys: pytest.CaptureFixture[str]) -> None:
    rules = ({"when": {"user_contains": "two"}, "reply": {"text": "second"}}, {"reply": {"text": "first"}})
    with live_server(StubBackend(script(*rules))) as server:
        code = _app(server.url).pipe_loop(io.StringIO("one\n\n/system terse\ntwo\n/exit\nthree\n"))
        assert server.recorded[-1]["system"] == "terse"
        assert [m["content"] for m in server.recorded[-1]["messages"]] == ["one", "first", "two"]
    assert code == 0
    captured = capsys.readouterr()
    assert captured.out == "first\n\nsecond\n" and "system prompt set" in captured.err


def test_pipe_loop_failures(capsys: pytest.CaptureFixture[str]) -> None:
    with live_server(StubBackend(script(context_window=64))) as server:
        assert _app(server.url).pipe_loop(io.StringIO("word " * 100 + "\nhi\n")) == 1
    assert _app(f"http://127.0.0.1:{free_port()}").pipe_loop(io.StringIO("hi\nagain\n")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "cannot reach" in err[1]


def test_pipe_loop_declines_tool_calls(capsys: pytest.CaptureFixture[str]) -> None:
    rules = (
        {"when": {"last_role": "tool"}, "reply": {"text": "ok, I will not"}},
        {"reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "/etc/passwd"}}]}},
    )
    with live_server(StubBackend(script(*rules))) as server:
        assert _app(server.url, tools=True).pipe_loop(io.StringIO("read it\n")) == 0
        assert server.recorded[-1]["messages"][-1]["content"].startswith("error: the user declined")
    captured = capsys.readouterr()
    assert captured.out == "ok, I will not\n" and "declined" in captured.err
