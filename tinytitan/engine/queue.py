"""The bounded admission queue (reference §13).

``admit()`` answers at once: a ``Ticket`` while running + waiting is below ``slots + limit``,
else ``QueueFull``. A ticket then waits FIFO for a free slot — and, with a KV memory budget
(``kv/budget.py``), for its KV reservation to fit beside the running rows'; leaving (done,
cancelled, client gone) frees its place and its reservation immediately and wakes the next waiter.
``close(error)`` (the server is shutting down) fails every waiting ticket with an ``error()`` and
refuses new ones; running ones keep their slots.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from tinytitan.engine.errors import QueueFull, TinyTitanError
from tinytitan.engine.kv.budget import KvBudget

__all__ = ["AdmissionQueue", "Ticket"]


class Ticket:
    def __init__(self, queue: AdmissionQueue, kv_bytes: int = 0) -> None:
        self._queue = queue
        self.kv_bytes = kv_bytes  # what its row's KV cache may grow to (reserved while it runs)
        self.running = False
        self.released = False
        self._ready: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        """Wait for a slot (FIFO). Cancelling the wait leaves the queue."""
        if self.running:
            return
        if self.released:
            raise RuntimeError("ticket already released")
        try:
            await self._queue._acquire(self)
        except BaseException:
            self.release()
            raise

    def tick(self) -> None:
        """Its row made progress: the budget's line of use, once a minute while rows run."""
        if self.running and self._queue.budget is not None:
            self._queue.budget.tick(self._queue.waiting)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._queue._release(self)


class AdmissionQueue:
    def __init__(self, limit: int = 4, slots: int = 1, budget: KvBudget | None = None) -> None:
        self.limit = max(0, limit)
        self.slots = max(1, slots)
        self.budget = budget
        self._running = 0
        self._waiting: deque[Ticket] = deque()
        self._tickets = 0  # admitted, not yet released
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed: Callable[[], TinyTitanError] | None = None

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return self._tickets - self._running

    def admit(self, kv_bytes: int = 0) -> Ticket:
        """A place in the queue for a row whose KV cache may grow to ``kv_bytes`` (it must fit the
        budget alone: ``Engine.prepare`` refuses one that cannot)."""
        if self._closed is not None:
            raise self._closed()
        if self._tickets >= self.slots + self.limit:
            raise QueueFull()
        self._tickets += 1
        self._idle.clear()
        return Ticket(self, kv_bytes)

    async def wait_idle(self) -> None:
        """Wait until no ticket is admitted (used before unloading a model)."""
        await self._idle.wait()

    def close(self, error: Callable[[], TinyTitanError]) -> None:
        """Fail every waiting ticket with an ``error()`` and refuse new ones; running tickets go on."""
        self._closed = error
        while self._waiting:
            ready = self._waiting.popleft()._ready
            if ready is not None and not ready.done():
                ready.set_exception(error())

    def _can_start(self, ticket: Ticket) -> bool:
        return self._running < self.slots and (self.budget is None or self.budget.fits(ticket.kv_bytes))

    def _start(self, ticket: Ticket) -> None:
        ticket.running = True
        self._running += 1
        if self.budget is not None:
            self.budget.reserve(ticket.kv_bytes)

    async def _acquire(self, ticket: Ticket) -> None:
        if self._closed is not None:
            raise self._closed()
        if not self._waiting and self._can_start(ticket):
            self._start(ticket)
            return
        loop = asyncio.get_running_loop()
        ticket._ready = loop.create_future()
        self._waiting.append(ticket)
        await ticket._ready
        # _release marked us running before resolving the future

    def _release(self, ticket: Ticket) -> None:
        self._tickets -= 1
        if ticket.running:
            ticket.running = False
            self._running -= 1
            if self.budget is not None:
                self.budget.release(ticket.kv_bytes)
        elif ticket in self._waiting:
            self._waiting.remove(ticket)
            if ticket._ready is not None and not ticket._ready.done():
                ticket._ready.cancel()
        while self._waiting and self._can_start(self._waiting[0]):  # in arrival order: the first waits first
            nxt = self._waiting.popleft()
            if nxt._ready is not None and not nxt._ready.done():
                self._start(nxt)
                nxt._ready.set_result(None)
        if self._tickets == 0:
            self._idle.set()
