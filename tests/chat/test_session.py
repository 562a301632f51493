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
    chat, instructions = load_session(json.loads(path.read_text()))  # what `tinytitan compact` does
    assert [m.role for m in chat.messages] == ["system", "user", "assistant", "user"] and instructions == "be brief"


def test_load_takes_a_bare_item_list(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([user_item("a")]))
    session = Session("m", instructions="kept")
    assert session.load(path) is None
    assert session.items == [user_item("a")] and session.instructions == "kept"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not JSON"),
        ("42", "not a saved session"),
        ('{"prompt": "hi"}', "not a saved session"),
        ('{"input": [1]}', "not a usable session"),
        ('{"messages": [{"role": "wizard", "content": "x"}]}', "not a usable session"),
    ],
)
def test_load_refuses_what_it_cannot_use(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    session = Session("m")
    with pytest.raises(SessionFileError, match=message):
        session.load(path)
    with pytest.raises(SessionFileError, match="cannot read"):
        session.load(tmp_path / "missing.json")


CHAT = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": "There is a.txt."},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ],
}
MESSAGES = {
    "model": "m",
    "max_tokens": 100,
    "system": "be brief",
    "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"}]},
        {"role": "assistant", "content": "There is a.txt."},
        {"role": "user", "content": "thanks"},
    ],
}


@pytest.mark.parametrize("doc", [CHAT, MESSAGES], ids=["chat", "messages"])
def test_load_reads_chat_and_messages_requests_as_responses_items(tmp_path: Path, doc: dict[str, object]) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    session = Session("x")
    assert session.load(path) == "m"
    assert session.instructions == "be brief" and session.turns() == 2
    kinds = [(i["type"], i.get("role")) for i in session.items]
    assert kinds == [
        ("message", "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
        ("message", "user"),
    ]
    call, output = session.items[1], session.items[2]
    assert (call["call_id"], call["name"], output["call_id"], output["output"]) == ("c1", "ls", "c1", "a.txt")
    assert session.items[3]["content"][0]["text"] == "There is a.txt."
    assert session.items[4]["content"][0]["text"] == "thanks"
