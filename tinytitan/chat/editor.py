"""The input line: prompt_toolkit, with history kept across sessions and multi-line input.

- History lives in ``$XDG_DATA_HOME/tinytitan/chat_history`` (``~/.local/share/…``; see
  ``tinytitan.paths``), readable by its owner only; Up / Down and Ctrl-R search it.
- A paste keeps its newlines (bracketed paste). A line ending in ``\\`` continues on the next
  line; Alt-Enter (or Esc then Enter) inserts a newline; ``\"\"\"`` opens a block that a line
  ending in ``\"\"\"`` closes (as in ``ollama run``).
- Ctrl-C clears a line that has text; on an empty line it raises ``KeyboardInterrupt`` (the
  caller leaves on the second). Ctrl-D on an empty line raises ``EOFError``.
"""

from __future__ import annotations

import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output

from tinytitan.paths import chat_history_path

__all__ = ["Editor", "is_open_block", "unwrap_block"]

BLOCK = '"""'


def is_open_block(text: str) -> bool:
    """A ``\"\"\"`` block that has not been closed yet."""
    stripped = text.strip()
    return stripped.startswith(BLOCK) and (len(stripped) < 2 * len(BLOCK) or not stripped.endswith(BLOCK))


def unwrap_block(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith(BLOCK) and stripped.endswith(BLOCK) and len(stripped) >= 2 * len(BLOCK):
        return stripped[len(BLOCK) : -len(BLOCK)].strip("\n")
    return text


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    @keys.add("c-j")  # a bare line feed (what a script typing into the terminal may send)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        text = buffer.text
        if buffer.document.is_cursor_at_the_end and text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        elif is_open_block(text):
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _clear(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return keys


def _owner_only(path: Path) -> None:
    """The history holds every paste: owner-only, like every other file TinyTitan writes."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)  # a history written by an older version was 0644


class Editor:
    def __init__(
        self, history: Path | None = None, *, input: Input | None = None, output: Output | None = None
    ) -> None:
        path = history or chat_history_path()
        _owner_only(path)
        self._session: PromptSession[str] = PromptSession(
            input=input,
            output=output,
            history=FileHistory(str(path)),
            key_bindings=_bindings(),
            multiline=True,  # Enter is bound above: it submits unless the line continues
            prompt_continuation=lambda width, _line, _soft: "." * (width - 1) + " ",
            enable_history_search=False,
        )

    def read(self, prompt: str = ">>> ", default: str = "", *, sent: bool = False) -> str:
        """One message (may span lines), starting from ``default`` (keys typed ahead; ``sent``: Enter
        was among them, so it is shown and taken as it is); raises ``KeyboardInterrupt`` /
        ``EOFError`` as above."""
        text = self._session.prompt(FormattedText([("bold ansigreen", prompt)]), default=default, accept_default=sent)
        return unwrap_block(text)
