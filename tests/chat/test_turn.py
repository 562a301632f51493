"""One user message through the server: history kept, tools asked and run, Ctrl-C, rollback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinytitan.chat.client import ChatClient, ServerDown
from tinytitan.chat.session import Session
from tinytitan.chat.turn import DECLINED, MAX_TOOL_ROUNDS, TurnRunner
from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.process import free_port
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.waiting import wait_until


class View:
    """A view that records what it was shown; ``interrupt_after`` text deltas it raises Ctrl-C."""

    def __init__(self, log: list[tuple[str, Any]], interrupt_after: int | None = None) -> None:
        self.log = log
        self.interrupt_after = interrupt_after

    def __enter__(self) -> View:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def thought(self, text: str) -> None:
        self.log.append(("thought", text))

    def text(self, text: str) -> None:
        self.log.append(("text", text))
        if self.interrupt_after is not None and sum(k == "text" for k, _ in self.log) >= self.interrupt_after:
            raise KeyboardInterrupt

    def tool_call(self, name: str, arguments: str) -> None:
        self.log.append(("call", name))

    def finish(self, response: dict[str, Any]) -> None:
        self.log.append(("finish", response["status"]))

    def interrupted(self, reason: str | None = None) -> None:
        self.log.append(("interrupted", reason))

    def withdrawn(self) -> None:
        self.log.append(("withdrawn", None))

    def failed(self, message: str) -> None:
        self.log.append(("failed", message))


def _read(path: Path) -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": str(path)}}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    (tmp_path / "notes.txt").write_text("the secret is 42")
    rules = (
        {"when": {"last_role": "tool"}, "reply": {"text": "done reading"}},
        {"when": {"user_contains": "loop"}, "reply": {"tool_calls": [_read(tmp_path / "notes.txt")]}},
        {"when": {"user_contains": "notes"}, "reply": {"tool_calls": [_read(tmp_path / "notes.txt")]}},
        {"when": {"user_contains": "slow"}, "reply": {"text": "a b c d e f g h i j", "chunk_delay_ms": 100}},
        {"reply": {"reasoning": "hmm", "text": "hello"}},
    )
    with live_server(StubBackend(script(*rules, context_window=4000))) as live:
        yield live


def _runner(server: LiveServer, confirm: Any = None, **view: Any) -> tuple[TurnRunner, list[tuple[str, Any]]]:
    log: list[tuple[str, Any]] = []
    runner = TurnRunner(ChatClient(server.url), Session(STUB_MODEL), lambda: View(log, **view), confirm)
    return runner, log


def test_a_turn_keeps_the_servers_output_items(server: LiveServer) -> None:
    runner, log = _runner(server)
    assert runner.run("hi") == "done"
    assert [i["type"] for i in runner.session.items] == ["message", "reasoning", "message"]
    assert ("thought", "hmm") in log and log[-1] == ("finish", "completed")
    assert runner.run("again") == "done"
    assert [m["role"] for m in server.recorded[-1]["messages"]] == ["user", "assistant", "user"]


def test_tools_are_asked_run_and_answered(server: LiveServer, tmp_path: Path) -> None:
    asked: list[tuple[str, str]] = []

    def confirm(name: str, args: str) -> bool:
        asked.append((name, args))
        return True

    runner, _log = _runner(server, confirm=confirm)
    assert runner.run("read my notes") == "done"
    assert asked == [("read_file", json.dumps({"path": str(tmp_path / "notes.txt")}))]
    kinds = [i["type"] for i in runner.session.items]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert runner.session.items[2]["output"] == "the secret is 42"
    assert server.recorded[-1]["messages"][-1] == {
        "role": "tool",
        "content": "the secret is 42",
        "tool_calls": [],
        "tool_call_id": runner.session.items[1]["call_id"],
    }
    assert [t["name"] for t in server.recorded[-1]["tools"]] == ["read_file", "list_directory"]


def test_a_declined_call_is_told_to_the_model(server: LiveServer) -> None:
    runner, _ = _runner(server, confirm=lambda name, args: False)
    assert runner.run("read my notes") == "done"
    assert runner.session.items[2]["output"] == DECLINED


def test_tool_rounds_are_bounded(server: LiveServer) -> None:
    runner, _ = _runner(server, confirm=lambda name, args: True)
    runner.session.items.clear()
    backend = server.engine.backend
    assert isinstance(backend, StubBackend)
    backend.script["rules"].pop(0)  # the model now calls the tool forever
    assert runner.run("loop") == "done"
    assert sum(i["type"] == "function_call" for i in runner.session.items) == MAX_TOOL_ROUNDS + 1


def test_ctrl_c_keeps_the_message_and_what_was_shown(server: LiveServer) -> None:
    runner, log = _runner(server, interrupt_after=3)
    assert runner.run("slow please") == "stopped"
    assert ("interrupted", None) in log
    items = runner.session.items
    assert [i["role"] for i in items] == ["user", "assistant"]
    assert items[1]["content"][0]["text"] == "a b c"
    runner.new_view = lambda: View(log)
    assert runner.run("and now") == "done"
    turns = server.recorded[-1]["messages"]
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "slow please"),
        ("assistant", "a b c"),
        ("user", "and now"),
    ]


def test_a_failed_turn_is_rolled_back(server: LiveServer) -> None:
    runner, log = _runner(server)
    assert runner.run("word " * 5000) == "failed"
    assert runner.session.items == [] and log[-1][0] == "failed"
    runner.client = ChatClient(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ServerDown):
        runner.run("hi")
    assert runner.session.items == []


PARAGRAPH = "The fox went down to the river, looked at the water and went home again to his mother. "


def test_an_answer_that_repeats_forever_is_stopped_early_and_one_copy_kept() -> None:
    """The scripted model repeats one paragraph without end (a minute of it at this pace, far more
    than the cap allows): the chat stops the stream after a few copies and says why."""
    forever = {"text": "Once upon a time. " + PARAGRAPH * 5000, "chunk_delay_ms": 10}
    with live_server(StubBackend(script({"reply": forever}, context_window=1_000_000))) as live:
        log: list[tuple[str, Any]] = []
        runner = TurnRunner(ChatClient(live.url), Session(STUB_MODEL), lambda: View(log))
        assert runner.run("write a long story") == "stopped"
        shown = "".join(text for kind, text in log if kind == "text")
        assert len(shown) < 20 * len(PARAGRAPH)
        assert log[-1] == ("interrupted", f"the answer kept repeating the same {len(PARAGRAPH)} characters")
        kept = runner.session.items[-1]["content"][0]["text"]
        assert kept.startswith("Once upon a time. The fox") and kept.count("looked at the water") == 1
        wait_until(lambda: not live.engine.jobs, limit=60, what="for the server to cancel the generation")
        live.engine.backend.script["rules"] = [{"reply": {"text": "hello"}}]  # type: ignore[attr-defined]
        assert runner.run("again") == "done"  # the slot is free


def test_thinking_that_repeats_forever_is_stopped_too() -> None:
    forever = {"reasoning": PARAGRAPH * 5000, "text": "never reached", "chunk_delay_ms": 10}
    with live_server(StubBackend(script({"reply": forever}, context_window=1_000_000))) as live:
        log: list[tuple[str, Any]] = []
        runner = TurnRunner(ChatClient(live.url), Session(STUB_MODEL), lambda: View(log))
        assert runner.run("think hard") == "stopped"
        assert log[-1] == ("interrupted", f"the thinking kept repeating the same {len(PARAGRAPH)} characters")
        assert not any(kind == "text" for kind, _ in log)
        assert [i["role"] for i in runner.session.items] == ["user"]  # nothing was answered
        wait_until(lambda: not live.engine.jobs, limit=60, what="for the server to cancel the generation")
