"""Whether the server's model is in yet: ``loading`` → ``ready`` (or ``failed``), with progress lines.

``Engine.readiness`` is one ``Readiness``; ``Engine.warm_up`` moves it on when the first model's
weights are in (or failed to load). ``/health`` reports its state, ``/ready`` answers 503 until it
is ``ready``, and ``tinytitan serve`` prints its progress lines and the banner once it is ready.

The loading code says what it is doing with ``progress("converting NAME (94 MB)")``: every
listener registered with ``listen`` gets the line (``tinytitan serve`` shows it on stderr, and each
``Readiness`` keeps the latest one); the debug log gets it too. No mlx here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

__all__ = ["Readiness", "State", "listen", "progress"]

log = logging.getLogger("tinytitan.loading")

State = Literal["loading", "ready", "failed"]

_listeners: list[Callable[[str], None]] = []
_lock = threading.Lock()


def progress(line: str) -> None:
    """Say what loading is doing now (one short line, no trailing ellipsis) to every listener."""
    with _lock:
        listeners = list(_listeners)
    log.debug("%s", line)
    for listener in listeners:
        listener(line)


@contextmanager
def listen(listener: Callable[[str], None]) -> Iterator[None]:
    """Call ``listener`` with every ``progress`` line said inside the block (from any thread)."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


class Readiness:
    """``state`` (loading, ready, failed), ``error`` once failed, ``step``: the latest progress line.

    Thread-safe; ``on_change`` callbacks run on the thread that changed the state.
    """

    def __init__(self) -> None:
        self.state: State = "loading"
        self.error: str | None = None
        self.step: str | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[Readiness], None]] = []

    def on_change(self, callback: Callable[[Readiness], None]) -> None:
        """Call ``callback(self)`` when the state leaves ``loading`` (at once if it already has)."""
        with self._lock:
            self._callbacks.append(callback)
            settled = self.state != "loading"
        if settled:
            callback(self)

    def note(self, line: str) -> None:
        if self.state == "loading":
            self.step = line

    def ready(self) -> None:
        self._settle("ready", None)

    def fail(self, error: str) -> None:
        self._settle("failed", error)

    def _settle(self, state: State, error: str | None) -> None:
        with self._lock:
            if self.state != "loading":
                return
            self.state, self.error, self.step = state, error, None
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback(self)

    def as_json(self) -> dict[str, str]:
        """What ``/health`` and ``/ready`` say: ``{"status": "ok" | "loading" | "failed", …}``."""
        body: dict[str, str] = {"status": "ok" if self.state == "ready" else self.state}
        if self.state == "loading" and self.step:
            body["step"] = self.step
        if self.error:
            body["error"] = self.error
        return body
