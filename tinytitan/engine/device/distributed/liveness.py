"""Bounded waits: a rank that dies or hangs is noticed within ``timeout`` seconds.

Every collective a rank issues runs under ``Watchdog.guard``: a deadline watched by a monitor thread.
A peer that *dies* usually surfaces at once (the ring backend raises "connection to a peer was
lost"); one that *hangs* (a stopped process, a cut cable with no reset) leaves the collective
blocked inside MLX, where no Python code runs — the monitor thread notices the deadline pass and
calls ``on_expire`` (which fails the requests and ends the process: a thread blocked in C cannot be
unwound). Rank 0 sends a heartbeat when idle, so followers also bound their wait for the next step.

Time this process itself stood still (another thread held the GIL, the machine was overloaded) is
not counted against the peer: when the monitor thread wakes late, the deadline moves by as much.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["EXIT_GROUP_LOST", "Watchdog", "exit_now"]

log = logging.getLogger("tinytitan.distributed")

EXIT_GROUP_LOST = 75  # EX_TEMPFAIL: the group lost a rank; the launcher may restart it


def exit_now(code: int = EXIT_GROUP_LOST) -> None:
    """Leave at once, even with a thread blocked inside MLX (no finalization, streams flushed)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


class Watchdog:
    def __init__(self, timeout: float, on_expire: Callable[[str], None], *, tick: float | None = None) -> None:
        self.timeout = timeout
        self._on_expire = on_expire
        self._tick = tick if tick is not None else max(0.05, min(1.0, timeout / 20))
        self._armed: tuple[float, str] | None = None
        self._fired = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tinytitan-watchdog", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def guard(self, what: str, timeout: float | None = None) -> Iterator[None]:
        """Run the block under a deadline (``timeout`` seconds, the watchdog's by default)."""
        with self._lock:
            self._armed = (time.monotonic() + (timeout if timeout is not None else self.timeout), what)
        try:
            yield
        finally:
            with self._lock:
                self._armed = None

    @property
    def fired(self) -> bool:
        return self._fired

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            starved = now - last - self._tick  # this process did not run us (the GIL, the scheduler)
            last = now
            with self._lock:
                armed = self._armed
                if armed is not None and starved > self._tick:
                    # the guarded thread was held up as long as we were: that is not the peer's silence
                    armed = self._armed = (armed[0] + starved, armed[1])
                expired = armed is not None and now > armed[0] and not self._fired
                if expired:
                    self._fired = True
            if expired and armed is not None:
                log.error("distributed: no answer within %.0f s while %s", self.timeout, armed[1])
                self._on_expire(f"no answer within {self.timeout:g} s while {armed[1]}")
                return
