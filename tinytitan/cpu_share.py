"""The CPU's share on a busy machine: as many threads for our products as there are free cores.

A preloaded BLIS runs a product on every core it is given, and its threads wait for each other at
barriers by spinning. When another process takes a core, the thread that shares that core with it
is descheduled for whole time slices while its partner spins at the next barrier, so a prompt took
4–13× its quiet time beside one busy process on 2 cores (issue 43) instead of the 2× that losing a
core costs. The NumPy attention's workers hand each layer's heads out and wait for the last, which
suffers the same way.

``CpuShare`` watches how much CPU the *other* processes take — the busy time of the cores this
process may use (``/proc/stat``, steal included) less this process's own CPU time — every ``TICK`` seconds over the
last few ticks, and gives the products every core while the others take less than ``SLACK`` of
one, one fewer for each further core they take (at least one). It drops at once when the others
start and climbs back after ``CALM_TICKS`` quiet ticks in a row: a thread too many costs whole time
slices at every barrier, a thread too few only the free core's share. It sets the count with the
library's own public call (``bli_thread_set_num_threads`` / ``openblas_set_num_threads``, which BLIS
reads at the start of every product, so a change takes effect at the next one, mid-prompt too), and
never above the count the library started with (``BLIS_NUM_THREADS``, the usable cores by
default). The attention workers follow ``threads()``.

Measured on a 2-core VM that other jobs kept busy (SmolLM2-135M, fp32, BLIS 0.9.0; issue 43's
closing note): a 300-token prompt cost 1.4 s of CPU with one BLIS thread and 13 s with two (the
spinning), 23 s against 1.5 s to wait for; one product ``(m × 576)·(576 × 1536)`` with two threads
took ×6–14 one thread's time at m ≥ 256 (BLIS's packed path) and ×3–4 at m = 4–16, about the same
at m = 1 and 64–192. One thread decodes a little slower than two unstarved ones (0.8–0.9×).

On a quiet machine nothing changes (every core, as before). Without ``/proc/stat`` (not Linux) it
does nothing. ``TINYTITAN_CPU_SHARE=off`` keeps the library's count fixed. This module must not
import mlx or numpy.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

__all__ = [
    "CALM_TICKS",
    "OFF_ENV",
    "SLACK",
    "TICK",
    "CpuShare",
    "Sample",
    "most",
    "parse_stat",
    "read_sample",
    "start",
    "steady",
    "stop",
    "threads",
    "threads_for",
]

OFF_ENV = "TINYTITAN_CPU_SHARE"
SLACK = 0.25  # cores the other processes may take while our products still use every core
TICK = 0.2  # seconds between two looks at the machine
WINDOW = 3  # samples the others' share is averaged over (WINDOW - 1 ticks)
CALM_TICKS = 2  # quiet ticks in a row before the thread count climbs back
_CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_OFF = {"0", "off", "false", "no"}


@dataclass(frozen=True, slots=True)
class Sample:
    """One look: the wall clock, the CPU time every core spent busy, and this process's own (seconds)."""

    wall: float
    busy: float
    own: float


def parse_stat(lines: Iterable[str], cpus: Collection[int] | None = None) -> float | None:
    """The busy seconds of the CPUs ``cpus`` (all of them when None) from ``/proc/stat``'s ``cpu``
    lines (steal counts: the hypervisor took it), or None when it has no line for them."""
    busy: float | None = None
    for line in lines:
        if not line.startswith("cpu"):
            break  # the cpu lines come first
        fields = line.split()
        number = fields[0][3:]
        wanted = number == "" if cpus is None else number.isdigit() and int(number) in cpus
        if wanted and len(fields) >= 6:
            # user nice system idle iowait irq softirq steal (guest time is already in user / nice)
            values = [int(v) for v in fields[1:9]]
            busy = (busy or 0.0) + (sum(values) - values[3] - values[4]) / _CLOCK_TICK
    return busy


def read_sample() -> Sample | None:
    """A ``Sample`` of the cores this process may run on (its affinity), or None where
    ``/proc/stat`` cannot be read."""
    try:
        cpus: set[int] | None = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        cpus = None
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as stat:
            busy = parse_stat(stat, cpus)
    except (OSError, ValueError):
        return None
    return None if busy is None else Sample(time.monotonic(), busy, time.process_time())


def threads_for(others: float, most: int, slack: float = SLACK) -> int:
    """Threads for our products when other processes take ``others`` cores: ``most`` while they take
    less than ``slack``, then one fewer per core they take, at least 1."""
    if others < slack:
        return most
    return max(1, min(most, most - math.ceil(others - slack)))


class CpuShare:
    """Decides the thread count tick by tick and tells the library (``apply``) when it changes."""

    def __init__(
        self,
        most: int,
        apply: Callable[[int], None],
        sample: Callable[[], Sample | None] | None = None,
        tick: float = TICK,
    ) -> None:
        self.most = max(1, most)
        self.apply = apply
        self.sample = sample if sample is not None else read_sample
        self.tick = tick
        self.threads = self.most
        self.others = 0.0  # cores the other processes took over the last window
        self._samples: deque[Sample] = deque(maxlen=WINDOW)
        self._calm = 0
        self.lock = threading.Lock()  # held while the count changes, and by ``steady()``
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self) -> int:
        """One tick: look, decide, apply a change; the thread count now."""
        now = self.sample()
        if now is None:
            return self.threads
        self._samples.append(now)
        first = self._samples[0]
        wall = now.wall - first.wall
        if wall <= 0:
            return self.threads
        self.others = max(0.0, (now.busy - first.busy) - (now.own - first.own)) / wall
        wanted = threads_for(self.others, self.most)
        if wanted < self.threads:  # others came: at once
            self._calm = 0
            self._set(wanted)
        elif wanted > self.threads:  # they left: after CALM_TICKS quiet ticks in a row
            self._calm += 1
            if self._calm >= CALM_TICKS:
                self._calm = 0
                self._set(wanted)
        else:
            self._calm = 0
        return self.threads

    def _set(self, count: int) -> None:
        with self.lock:
            self.threads = count
            self.apply(count)

    def start(self) -> None:
        """Watch in a daemon thread until ``stop()``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="tinytitan-cpu-share", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.threads != self.most:
            self._set(self.most)

    def _watch(self) -> None:
        self.update()
        while not self._stop.wait(self.tick):
            self.update()


_share: CpuShare | None = None
_lock = threading.Lock()


def start() -> CpuShare | None:
    """Watch the machine for this process's preloaded BLAS (idempotent); None when there is nothing
    to adapt: no such library, one thread only, no ``/proc/stat``, or ``TINYTITAN_CPU_SHARE=off``."""
    global _share
    from tinytitan import cpu_blas

    with _lock:
        if _share is not None:
            return _share
        if os.environ.get(OFF_ENV, "").strip().lower() in _OFF or read_sample() is None:
            return None
        control = cpu_blas.thread_control()
        if control is None:
            return None
        get, set_ = control
        most = get()
        if most < 2:
            return None
        _share = CpuShare(most, set_)
        _share.start()
        return _share


def stop() -> None:
    """Stop watching and give the library its starting count back (tests)."""
    global _share
    with _lock:
        share, _share = _share, None
    if share is not None:
        share.stop()


def steady() -> AbstractContextManager[object]:
    """A block in which the count does not change: code that limits every BLAS for a while and
    restores what it found (the attention) would otherwise restore a count the watch has replaced."""
    share = _share
    return share.lock if share is not None else nullcontext()


def most() -> int | None:
    """The thread count the watched library started with (what a quiet machine gets); None when
    nothing is watched."""
    share = _share
    return None if share is None else share.most


def threads(most: int) -> int:
    """How many threads CPU work beside the products (the attention's workers) should use now: the
    watched count while watching, else ``most``."""
    share = _share
    return most if share is None else max(1, min(most, share.threads))
