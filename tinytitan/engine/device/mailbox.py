"""Outputs on their way from the device thread to the event loops that wait for them.

One wake-up per loop while it has not yet read what came before: the device thread appends each
step's outputs to the loop's box, and only the step that finds no box waiting schedules the loop's
drain (``call_soon_threadsafe``, a write to the loop's self-pipe). A loop that keeps up is woken once
per step, as before; one that lags behind (a busy loop, a fast device) reads several steps at once,
in order, with one wake-up — and a ``Job`` that finds several outputs waiting reads them as one.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Sequence

from tinytitan.engine.device.batch import Output

__all__ = ["Mailboxes"]


class Mailboxes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._boxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Output]] = weakref.WeakKeyDictionary()

    def deliver(self, outputs: Sequence[Output]) -> None:
        """Hand ``outputs`` (any thread) to their rows' loops, in order."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Output]] = {}
        for output in outputs:
            by_loop.setdefault(output.row.loop, []).append(output)
        wake: list[asyncio.AbstractEventLoop] = []
        with self._lock:
            for loop, batch in by_loop.items():
                box = self._boxes.get(loop)
                if box is None:
                    self._boxes[loop] = batch
                    wake.append(loop)
                else:
                    box.extend(batch)  # the loop has a drain scheduled: it reads these too
        for loop in wake:
            try:
                loop.call_soon_threadsafe(self._drain, loop)
            except RuntimeError:  # a loop that has closed: nobody waits for these rows
                with self._lock:
                    self._boxes.pop(loop, None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._boxes.pop(loop, [])
        for output in batch:
            output.row.deliver(output)
