"""The bounded FIFO admission queue (reference §13)."""

from __future__ import annotations

import asyncio

import pytest

from tinytitan.engine.errors import QueueFull, ShuttingDown
from tinytitan.engine.queue import AdmissionQueue


def test_refuses_beyond_running_plus_limit() -> None:
    async def main() -> None:
        queue = AdmissionQueue(limit=1)
        a, b = queue.admit(), queue.admit()
        with pytest.raises(QueueFull):
            queue.admit()
        await a.wait()
        assert (queue.running, queue.waiting) == (1, 1)
        a.release()
        await b.wait()
        assert (queue.running, queue.waiting) == (1, 0)
        b.release()
        assert (queue.running, queue.waiting) == (0, 0)

    asyncio.run(main())


def test_fifo_order() -> None:
    async def main() -> list[int]:
        queue = AdmissionQueue(limit=3)
        order: list[int] = []
        first = queue.admit()
        await first.wait()

        async def worker(n: int) -> None:
            ticket = queue.admit()
            await ticket.wait()
            order.append(n)
            ticket.release()

        tasks = []
        for n in range(3):
            tasks.append(asyncio.create_task(worker(n)))
            await asyncio.sleep(0)
        first.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(main()) == [0, 1, 2]


def test_cancelled_waiter_leaves_the_queue() -> None:
    async def main() -> None:
        queue = AdmissionQueue(limit=1)
        first = queue.admit()
        await first.wait()
        waiter = queue.admit()
        task = asyncio.create_task(waiter.wait())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (queue.running, queue.waiting) == (1, 0)
        queue.admit()  # the place is free again

    asyncio.run(main())


def test_close_fails_the_waiting_and_refuses_new_tickets_while_running_ones_keep_their_slots() -> None:
    async def main() -> None:
        queue = AdmissionQueue(limit=3)
        running = queue.admit()
        await running.wait()
        waiters = [queue.admit(), queue.admit()]
        tasks = [asyncio.create_task(w.wait()) for w in waiters]
        await asyncio.sleep(0)
        admitted_not_waiting = queue.admit()  # admitted before the close, waits after it
        queue.close(ShuttingDown)
        for task in tasks:
            with pytest.raises(ShuttingDown):
                await task
        with pytest.raises(ShuttingDown):
            await admitted_not_waiting.wait()
        with pytest.raises(ShuttingDown):
            queue.admit()
        assert (queue.running, queue.waiting) == (1, 0) and running.running
        running.release()
        assert (queue.running, queue.waiting) == (0, 0)

    asyncio.run(main())
