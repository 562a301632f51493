"""The memory budget of the KV cache (``serve --max-kv-memory``): every running row's and the prompt
cache's, together.

A row reserves, when it is admitted, what its KV cache can grow to — its prompt and its whole output
budget, at the model's bytes per token in its form (``form.token_bytes``) — and gives it back when it
ends. The budget caps a row's context as the context window does (``Engine.prepare``): a prompt it
cannot hold, even alone, is refused before it is queued with the protocol's context error, naming the
budget, and the output budget is what the smaller of the two leaves after the prompt. The admission
queue (``queue.py``) starts a row only while the reservations fit the budget: a row that would pass
it waits in the queue, in arrival order (a stream gets its keepalives meanwhile). The prompt caches' in-memory
snapshots count against the budget too, but they can be let go: each holds at most what the rows
leave (``room``), evicting its least recently used snapshots on the device thread when a row starts
or a snapshot is stored. So what the KV cache holds never passes the budget by more than a step's
worth, and a long request waits rather than taking the machine's last gigabyte.

The default budget is half the memory free when the server starts, after the weights of the largest
model it serves (``default_limit``). No MLX here.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LOG_EVERY", "KvBudget", "available_memory", "default_limit", "size_text"]

log = logging.getLogger("tinytitan.engine")

LOG_EVERY = 60.0  # seconds between two lines of use against the budget while rows run
SHARE = 0.5  # the default budget's share of the memory the weights leave free at start
FLOOR = 64 * 2**20  # the smallest default budget (a machine with nothing free still serves short prompts)


def size_text(n: float) -> str:
    """``1.5 GiB``, ``640 MiB``, ``12 KiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{int(n)} bytes"


class KvBudget:
    """``limit`` bytes for the KV memory of every running row and of the prompt caches together.

    Thread-safe: the event loop reserves and releases, the device thread asks how much room a prompt
    cache has."""

    def __init__(self, limit: int, source: str = "--max-kv-memory") -> None:
        self.limit = limit
        self.source = source  # how the limit was chosen (the flag, or the default's arithmetic)
        self.cached: Callable[[], int] = lambda: 0  # bytes the prompt caches hold in memory (the Engine sets it)
        self._reserved = 0
        self._rows = 0
        self._lock = threading.Lock()
        self._said = 0.0

    @property
    def reserved(self) -> int:
        """Bytes the running rows have reserved."""
        return self._reserved

    def fits(self, nbytes: int) -> bool:
        """Whether a row reserving ``nbytes`` may start now."""
        with self._lock:
            return self._reserved + nbytes <= self.limit

    def reserve(self, nbytes: int) -> None:
        with self._lock:
            self._reserved += nbytes
            self._rows += 1

    def release(self, nbytes: int) -> None:
        with self._lock:
            self._reserved -= nbytes
            self._rows -= 1

    def room(self, holds: int) -> int:
        """What one prompt cache holding ``holds`` bytes may hold: the budget less the rows' reservations
        and the other prompt caches' snapshots."""
        with self._lock:
            reserved = self._reserved
        return max(0, self.limit - reserved - (self.cached() - holds))

    def refusal(self, prompt_tokens: int, token_bytes: int) -> str:
        """Why a prompt of ``prompt_tokens`` at ``token_bytes`` each never fits, even alone."""
        need = size_text(prompt_tokens * token_bytes)
        return (
            f"the prompt has {prompt_tokens} tokens, whose KV cache would take {need}; "
            f"the server's KV memory budget of {size_text(self.limit)} ({self.source}) holds "
            f"{self.limit // token_bytes} tokens of this model's context: shorten the conversation, or start the "
            "server with a larger --max-kv-memory"
        )

    def as_json(self, waiting: int = 0) -> dict[str, Any]:
        cached = self.cached()
        with self._lock:
            reserved, rows = self._reserved, self._rows
        return {
            "limit_bytes": self.limit,
            "used_bytes": reserved + cached,
            "rows_bytes": reserved,
            "prompt_cache_bytes": cached,
            "rows": rows,
            "waiting": waiting,
            "source": self.source,
        }

    def describe(self, waiting: int = 0) -> str:
        """One line of use against the budget."""
        facts = self.as_json(waiting)
        line = (
            f"KV memory {size_text(facts['used_bytes'])} of {size_text(self.limit)}: {facts['rows']} rows "
            f"{size_text(facts['rows_bytes'])}, prompt cache {size_text(facts['prompt_cache_bytes'])}"
        )
        return line + (f", {waiting} waiting for room" if waiting else "")

    def tick(self, waiting: int, now: float | None = None) -> bool:
        """Log the use once a minute while rows run or wait (under load); True when it logged."""
        now = time.monotonic() if now is None else now
        with self._lock:
            busy = self._rows > 0 or waiting > 0
            due = busy and now - self._said >= LOG_EVERY
            if due:
                self._said = now
        if due:
            log.info("%s", self.describe(waiting))
        return due


def available_memory() -> int | None:
    """Bytes of memory free for new work now (Linux: ``MemAvailable``; macOS: free, inactive and
    purgeable pages), or None when this system does not say."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["vm_stat"], capture_output=True, text=True, timeout=5, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        page = re.search(r"page size of (\d+) bytes", out)
        pages = {m.group(1): int(m.group(2)) for m in re.finditer(r"Pages (\w+):\s+(\d+)", out)}
        free = sum(pages.get(k, 0) for k in ("free", "inactive", "speculative", "purgeable"))
        return free * int(page.group(1)) if page and free else None
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def default_limit(weights: int, free: int | None = None) -> tuple[int, str] | None:
    """The default budget and how it was chosen: half of what the machine has free now once ``weights``
    (bytes) are in; None when the system does not say what is free."""
    free = available_memory() if free is None else free
    if free is None:
        return None
    limit = max(FLOOR, int((free - weights) * SHARE))
    why = f"half of the {size_text(free)} free at start, less {size_text(weights)} of weights"
    return limit, why
