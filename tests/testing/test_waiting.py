"""``wait_until``: returns once the condition holds, fails the test (saying what) when it never does."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tinytitan.testing.waiting import wait_until, wait_until_async


def test_returns_once_another_thread_makes_it_true() -> None:
    flag = threading.Event()
    threading.Timer(0.05, flag.set).start()
    wait_until(flag.is_set)
    assert flag.is_set()


def test_fails_naming_what_never_held() -> None:
    with pytest.raises(AssertionError, match=r"condition never held \(the queue drained\)"):
        wait_until(lambda: False, limit=0.05, what="(the queue drained)")


def test_the_async_one_lets_the_loop_run() -> None:
    async def main() -> list[int]:
        seen: list[int] = []
        asyncio.get_running_loop().call_later(0.05, seen.append, 1)
        await wait_until_async(lambda: bool(seen))
        return seen

    assert asyncio.run(main()) == [1]
    with pytest.raises(AssertionError):
        asyncio.run(wait_until_async(lambda: False, limit=0.05))
