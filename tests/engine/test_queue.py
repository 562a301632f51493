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


# -- the KV memory budget (issue 42): a row that would pass it waits for room -----------------------
def test_a_row_beyond_the_budget_waits_until_a_running_one_leaves() -> None:
    from tinytitan.engine.kv.budget import KvBudget

    async def main() -> None:
        budget = KvBudget(1000)
        queue = AdmissionQueue(limit=4, slots=4, budget=budget)  # slots to spare: only memory holds it back
        big = queue.admit(600)
        await big.wait()
        small = queue.admit(300)
        await small.wait()  # 900 of 1000: it fits beside
        assert budget.reserved == 900
        late = queue.admit(400)
        after = queue.admit(50)  # would fit, but waits behind the first in line
        waiting = [asyncio.create_task(late.wait()), asyncio.create_task(after.wait())]
        await asyncio.sleep(0)
        assert (queue.running, queue.waiting) == (2, 2) and not any(t.done() for t in waiting)
        small.release()  # 600 + 400 fits now, and 50 more does not
        await waiting[0]
        assert (queue.running, queue.waiting, budget.reserved) == (2, 1, 1000) and not waiting[1].done()
        big.release()
        await waiting[1]
        assert (queue.running, budget.reserved) == (2, 450)
        late.release()
        after.release()
        assert (queue.running, queue.waiting, budget.reserved) == (0, 0, 0)

    asyncio.run(main())


def test_a_row_that_leaves_while_waiting_for_room_reserves_nothing() -> None:
    from tinytitan.engine.kv.budget import KvBudget

    async def main() -> None:
        budget = KvBudget(100)
        queue = AdmissionQueue(limit=2, slots=2, budget=budget)
        first = queue.admit(80)
        await first.wait()
        second = queue.admit(80)
        task = asyncio.create_task(second.wait())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (queue.waiting, budget.reserved) == (0, 80)
        first.release()
        assert budget.reserved == 0

    asyncio.run(main())
