"""What ``tinytitan serve`` shows on stderr while the model comes in.

Each progress line of the loading code (``tinytitan.engine.readiness.progress``) is shown as it
comes: on a terminal one line rewritten in place with a spinner and the seconds spent on the step,
elsewhere (a log file, a service manager's journal) one plain ``TinyTitan: converting …`` line per
step. ``clear()`` removes the spinner line before the banner or an error is printed. While the
spinner shows, a log line (a warning, an access-log line) erases it first and it is redrawn below.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["LoadingDisplay", "shown_on_a_terminal"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_TICK = 0.1
_LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access")  # the ones with handlers of their own


class _EraseFirst(logging.Filter):
    def __init__(self, display: LoadingDisplay) -> None:
        super().__init__()
        self.display = display

    def filter(self, record: logging.LogRecord) -> bool:
        self.display.erase()
        return True


class LoadingDisplay:
    """Call it with each progress line; ``clear()`` when loading is over (safe from any thread); lines
    after that are not shown."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._step: str | None = None
        self._since = 0.0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._spinner: threading.Thread | None = None
        self._filter = _EraseFirst(self)
        self._handlers: list[logging.Handler] = []

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._stopped.is_set():  # loading is over: a later load (a catalog switch) goes to the log
                return
            if not self.tty:
                self.stream.write(f"TinyTitan: {line}…\n")
                self.stream.flush()
                return
            self._step, self._since = line, time.monotonic()
            if self._spinner is None:
                self._handlers = [h for name in _LOGGERS for h in logging.getLogger(name).handlers]
                for handler in self._handlers:
                    handler.addFilter(self._filter)
                self._spinner = threading.Thread(target=self._spin, name="tinytitan-spinner", daemon=True)
                self._spinner.start()
            self._draw(0)

    def _spin(self) -> None:
        frame = 0
        while not self._stopped.wait(_TICK):
            frame += 1
            with self._lock:
                if self._step is not None:
                    self._draw(frame)

    def _draw(self, frame: int) -> None:
        seconds = int(time.monotonic() - self._since)
        elapsed = f" {seconds} s" if seconds else ""
        self.stream.write(f"\r\033[K{_FRAMES[frame % len(_FRAMES)]} {self._step}…{elapsed}")
        self.stream.flush()

    def erase(self) -> None:
        """Erase the spinner line (it is drawn again on the next tick)."""
        with self._lock:
            if self.tty and self._step is not None:
                self.stream.write("\r\033[K")
                self.stream.flush()

    def clear(self) -> None:
        """Stop the spinner and erase its line (a terminal); nothing to do otherwise."""
        self._stopped.set()
        self.erase()
        with self._lock:
            self._step = None
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers = []


@contextlib.contextmanager
def shown_on_a_terminal() -> Iterator[None]:
    """The loading steps said inside the block, on a terminal only (``tinytitan chat`` loading a model
    in-process; piped, its stderr stays quiet), the spinner line erased after."""
    if not sys.stderr.isatty():
        yield
        return
    from tinytitan.engine.readiness import listen

    display = LoadingDisplay()
    try:
        with listen(display):
            yield
    finally:
        display.clear()
