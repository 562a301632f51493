"""Ctrl-C in the chat: raised where the chat can act on it, only noted where it cannot.

``sigint_held()``: inside ``with sigint_held() as held:`` a Ctrl-C raises nothing; ``held.pressed``
says whether one came, so the caller can act on it afterwards (bookkeeping that must finish, such
as keeping the history whole).

``CtrlC``: the interactive loop's handler. ``arm()`` (first thing inside a ``try``) lets the next
Ctrl-C raise ``KeyboardInterrupt``; the handler disarms itself as it raises, and ``disarm()`` (in a
``finally`` inside that ``try``) ends the armed stretch, so a press can never raise where no
``except`` would catch it (between two turns, while a hint prints). A press while disarmed is
counted in ``noted``. Outside the main thread (tests) both do nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["CtrlC", "Held", "sigint_held"]


@dataclass
class Held:
    pressed: bool = False


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigint_held() -> Iterator[Held]:
    held = Held()
    if not _main_thread():
        yield held
        return

    def note(*_args: Any) -> None:
        held.pressed = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)


class CtrlC:
    """``with CtrlC() as keys:`` installs the handler (disarmed) and restores the previous one after;
    ``restore=False`` leaves it installed, disarmed (the chat is leaving: a press only counts)."""

    def __init__(self, *, restore: bool = True) -> None:
        self.restore = restore
        self.armed = False
        self.noted = 0  # presses while disarmed, since the last arm()
        self._previous: Any = None
        self._installed = False

    def _handler(self, *_args: Any) -> None:
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        self.noted += 1

    def arm(self, *, keep: bool = False) -> None:
        """Let the next Ctrl-C raise. ``keep``: a press noted while disarmed counts (raised now);
        else it is forgotten (an impatient second press that already stopped an answer)."""
        pressed, self.noted = self.noted, 0
        if keep and pressed:
            raise KeyboardInterrupt
        self.armed = True

    def disarm(self) -> None:
        self.armed = False

    def __enter__(self) -> CtrlC:
        if _main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self._installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.armed = False
        if self._installed and self.restore:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
