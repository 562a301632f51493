"""Waiting for state another thread (or the server's loop) changes: a bound, never a timing test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["wait_until", "wait_until_async"]

_POLL = 0.01


def wait_until(condition: Callable[[], bool], *, limit: float = 20.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail the test (naming ``what``) if it never does within ``limit``."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"condition never held {what}".rstrip()
        time.sleep(_POLL)


async def wait_until_async(condition: Callable[[], bool], *, limit: float = 30.0, what: str = "") -> None:
    """``wait_until`` for a test running on an event loop: polls without blocking the loop."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"condition never held {what}".rstrip()
        await asyncio.sleep(_POLL)
