"""The engine's CPU threads: rendering, token counting, memory tools — work that is not MLX.

A fixed pool, sized from the CPU affinity and started whole at once, so a serving process's thread
count does not grow with the number of requests (the device worker is the only other thread the
engine runs). The server also makes it its event loop's default executor.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["CpuPool", "usable_cpus"]


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


class CpuPool(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose ``size`` threads all exist from the start."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or usable_cpus()
        super().__init__(max_workers=self.size, thread_name_prefix="tinytitan-cpu")
        started = threading.Barrier(self.size + 1)
        for _ in range(self.size):
            self.submit(started.wait)  # each waits for the others: every thread is started
        started.wait()
