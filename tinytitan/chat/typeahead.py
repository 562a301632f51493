"""Keys typed while an answer streams: not echoed into it, kept as the next prompt's initial text.

While ``with typeahead:`` holds, the terminal does not echo and hands keys over one by one (no line
editing), and a Ctrl-C does not flush what was typed (``NOFLSH``); Ctrl-C still interrupts. On the
way out the keys waiting in the terminal are read, and ``take()`` returns them as text: escape
sequences (arrows) dropped, Backspace and Ctrl-U applied. A line ended with Enter is a message
sent, as it would have been at the prompt (``take()`` says so; a line ending in ``\\`` continues);
what follows it waits for the next ``take()``. Where stdin is not a terminal nothing changes and
``take()`` is empty. ``put_back(text)`` puts a withdrawn message ahead of those keys, to be edited.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys
from typing import Any

__all__ = ["TypeAhead", "clean", "first_message"]

_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)


def clean(raw: str) -> str:
    """What the keys in ``raw`` would have left on an input line."""
    out: list[str] = []
    for char in _ESCAPES.sub("", raw.replace("\x1b[200~", "").replace("\x1b[201~", "")):
        if char in ("\x7f", "\b"):
            if out:
                out.pop()
        elif char == "\x15":  # Ctrl-U
            while out and out[-1] != "\n":
                out.pop()
        elif char in ("\r", "\n"):
            out.append("\n")
        elif char == "\t" or char >= " ":
            out.append(char)
    return "".join(out)


def first_message(typed: str) -> tuple[str, bool, str]:
    """(the first message in ``typed``, whether Enter sent it, what was typed after it)."""
    message = ""
    while True:
        line, enter, typed = typed.partition("\n")
        if enter and line.endswith("\\"):  # a continuation, as at the prompt
            message += line[:-1] + "\n"
            continue
        return message + line, bool(enter), typed


class TypeAhead:
    def __init__(self, fd: int | None = None) -> None:
        self._fd = fd
        self._saved: list[Any] | None = None
        self._pending = bytearray()
        self._put_back = ""
        self._later = ""  # typed after a message Enter sent: the prompt after that one

    def __enter__(self) -> TypeAhead:
        import termios

        try:
            fd = sys.stdin.fileno() if self._fd is None else self._fd
            saved = termios.tcgetattr(fd)
        except (OSError, ValueError, termios.error):  # not a terminal: nothing to hold back
            return self
        mode = [*saved[:6], list(saved[6])]
        mode[3] = (mode[3] & ~(termios.ECHO | termios.ICANON)) | termios.NOFLSH  # ISIG stays: Ctrl-C works
        termios.tcsetattr(fd, termios.TCSANOW, mode)
        self._fd, self._saved = fd, saved
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._saved is None or self._fd is None:
            return
        import termios

        with contextlib.suppress(OSError):
            while select.select([self._fd], [], [], 0)[0]:
                chunk = os.read(self._fd, 4096)
                if not chunk:
                    break
                self._pending += chunk
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self._fd, termios.TCSANOW, self._saved)
        self._saved = None

    def put_back(self, text: str) -> None:
        """Give ``text`` (a message the user withdrew) back with the next ``take``, before the keys."""
        self._put_back = text

    def take(self) -> tuple[str, bool]:
        """(the next prompt's text, whether Enter already sent it), from what was put back and typed
        ahead; forgets what it returns."""
        typed = (self._later + clean(self._pending.decode("utf-8", errors="ignore"))).lstrip("\n")
        self._pending.clear()
        self._later = ""
        if self._put_back:  # a withdrawn message comes back to be edited, never sent as it is
            text = "\n".join(part for part in (self._put_back, typed.strip("\n")) if part)
            self._put_back = ""
            return text, False
        if typed.startswith('"""'):  # a block opened ahead: the editor closes it
            return typed.rstrip("\n"), False
        message, sent, self._later = first_message(typed)
        return (message, True) if sent and message.strip() else (message.rstrip("\n"), False)
