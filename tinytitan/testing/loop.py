"""One event loop for synchronous callers (tests, benchmarks, scripts) driving the Engine.

The Engine's admission queue and its jobs' completion callbacks live on the loop that runs them,
as in the server, which has exactly one. ``asyncio.run`` per call would start a fresh loop each
time and strand a finished job's deferred slot release on a closed loop; ``run`` keeps one.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")

_runner: asyncio.Runner | None = None


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the process-wide loop (main thread only)."""
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
        atexit.register(_runner.close)
    return _runner.run(coro)
