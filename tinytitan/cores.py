"""How many cores this process may use: the size of every thread pool sized from the CPU.

``os.cpu_count()`` counts the machine's cores; a process pinned to fewer (``taskset``, a container's
cpuset, ``mlx.launch`` ranks sharing a host) that sizes its pools from it runs more threads than
cores, and they fight over them. The CPU affinity is what the scheduler will actually give us.
This module must not import mlx or numpy.
"""

from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one), at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1
