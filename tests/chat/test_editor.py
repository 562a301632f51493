"""The input line: continuation, blocks, Ctrl-C / Ctrl-D, history kept across sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from tinytitan.chat.editor import Editor, is_open_block, unwrap_block


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def _editor(tmp_path: Path, keys: PipeInput) -> Editor:
    return Editor(tmp_path / "history", input=keys, output=DummyOutput())


def test_blocks() -> None:
    assert is_open_block('"""') and is_open_block('"""\nabc') and not is_open_block('"""\nabc\n"""')
    assert not is_open_block("plain")
    assert unwrap_block('"""\nline one\nline two\n"""') == "line one\nline two"
    assert unwrap_block("plain") == "plain"


def test_enter_sends_and_continuations_add_lines(tmp_path: Path, keys: PipeInput) -> None:
    editor = _editor(tmp_path, keys)
    keys.send_text("hello\r")
    assert editor.read() == "hello"
    keys.send_text("one\\\rtwo\r")
    assert editor.read() == "one\ntwo"
    keys.send_text("a\x1b\rb\r")  # Esc, Enter: a newline
    assert editor.read() == "a\nb"
    keys.send_text('"""\rfirst\rsecond\r"""\r')
    assert editor.read() == "first\nsecond"
    keys.send_text("\x1b[200~pasted one\rpasted two\x1b[201~\r")  # a bracketed paste keeps its lines
    assert editor.read() == "pasted one\npasted two"


def test_ctrl_c_clears_a_line_and_interrupts_an_empty_one(tmp_path: Path, keys: PipeInput) -> None:
    editor = _editor(tmp_path, keys)
    keys.send_text("draft\x03kept\r")
    assert editor.read() == "kept"
    keys.send_text("\x03")
    with pytest.raises(KeyboardInterrupt):
        editor.read()
    keys.send_text("\x04")
    with pytest.raises(EOFError):
        editor.read()


def test_history_survives_a_new_session(tmp_path: Path, keys: PipeInput) -> None:
    _editor(tmp_path, keys)
    keys.send_text("first message\r")
    _editor(tmp_path, keys).read()
    keys.send_text("\x1b[A\r")  # Up, Enter in a new editor on the same file
    assert _editor(tmp_path, keys).read() == "first message"
