"""The conversation as Responses input items: request bodies, save and load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinytitan.chat.session import Session, SessionFileError, assistant_item, user_item
from tinytitan.cli.compact import load_session


def test_body_is_a_stateless_responses_request() -> None:
    session = Session("m", instructions="be brief", reasoning="low", max_output_tokens=100)
    session.items.append(user_item("hi"))
    body = session.body(tools=[{"type": "function", "name": "t"}])
    assert body == {
        "model": "m",
        "input": [user_item("hi")],
        "store": False,
        "instructions": "be brief",
        "reasoning": {"effort": "low"},
        "max_output_tokens": 100,
        "tools": [{"type": "function", "name": "t"}],
    }
    assert Session("m").body() == {"model": "m", "input": [], "store": False}


def test_save_load_round_trip_and_compact_reads_it(tmp_path: Path) -> None:
    session = Session("m", instructions="be brief", reasoning="high")
    session.items += [user_item("hi"), assistant_item("hello"), user_item("more")]
    path = tmp_path / "s.json"
    session.save(path)
    other = Session("x")
    assert other.load(path) == "m"
    assert other.items == session.items and other.instructions == "be brief" and other.reasoning == "high"
    assert other.turns() == 2
    messages, _notes, instructions = load_session(json.loads(path.read_text()))  # what `tinytitan compact` does
    assert [m.role for m in messages] == ["user", "assistant", "user"] and instructions == "be brief"


def test_load_takes_a_bare_item_list(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([user_item("a")]))
    session = Session("m", instructions="kept")
    assert session.load(path) is None
    assert session.items == [user_item("a")] and session.instructions == "kept"


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "not JSON"), ("42", "not a Responses session"), ('{"input": [1]}', "not a Responses session")],
)
def test_load_refuses_what_it_cannot_use(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    session = Session("m")
    with pytest.raises(SessionFileError, match=message):
        session.load(path)
    with pytest.raises(SessionFileError, match="cannot read"):
        session.load(tmp_path / "missing.json")
