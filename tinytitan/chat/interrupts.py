"""Ctrl-C held back while the chat does bookkeeping that must finish (keeping the history whole).

Inside ``with sigint_held() as held:`` a Ctrl-C raises nothing; ``held.pressed`` says whether one
came, so the caller can act on it afterwards. Outside the main thread (tests) it does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Held", "sigint_held"]


@dataclass
class Held:
    pressed: bool = False


@contextlib.contextmanager
def sigint_held() -> Iterator[Held]:
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def note(*_args: Any) -> None:
        held.pressed = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
