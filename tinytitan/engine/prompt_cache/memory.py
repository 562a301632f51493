"""Prompt cache: an LRU of KV snapshots matched by the longest exact token prefix (reference §13).

After a generation the backend stores the KV state with the tokens it holds (prompt + generated).
A new prompt reuses the snapshot sharing the longest token prefix with it: a private copy of that
snapshot, trimmed to the shared prefix (``mlx_lm.models.cache`` trim) rather than discarded, so one
conversation's turns keep hitting. At least one prompt token is always left to prefill (the model
must produce logits for the next token). The LRU holds at most ``max_entries`` snapshots and at
most ``max_bytes`` of KV memory; a snapshot whose tokens are a prefix of a newer one is dropped (the
newer one can be trimmed to it).

Copies are cheap: MLX arrays are values; a copy shares the snapshot's buffers until the new
generation writes into them (then MLX copies, leaving the snapshot untouched).

With a KV memory budget (``--max-kv-memory``, ``kv/budget.py``) the snapshots count against it with
the running rows: ``room(held)`` says how much this cache may hold now, and it lets its least recently
used snapshots go — on the device thread, when a row starts from it or a snapshot is stored — to stay
within that.

Snapshots are keyed by (model identity, token prefix): a snapshot is only ever offered to the model
that computed it, so one cache can serve several models. With a disk tier (``DiskTier``,
``--prompt-cache-dir``) every stored snapshot is also written to disk in the background, and a
lookup that the disk covers further than memory loads the prefix from there — after a restart or an
unload an agent's long prefix is still warm.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinytitan.engine.prompt_cache.disk import DiskTier

__all__ = ["PromptCache", "common_prefix"]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest shared prefix of two token sequences."""
    n = min(len(a), len(b))
    lo = 0
    # compare in blocks: long conversations share thousands of tokens
    step = 256
    while lo < n:
        hi = min(n, lo + step)
        if a[lo:hi] == b[lo:hi]:
            lo = hi
            continue
        for i in range(lo, hi):
            if a[i] != b[i]:
                return i
    return n


def _is_prefix(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) <= len(b) and common_prefix(a, b) == len(a)


@dataclass(slots=True)
class _Entry:
    model: str
    tokens: list[int]
    cache: list[Any]
    nbytes: int
    trimmable: bool


def _nbytes(cache: list[Any]) -> int:
    return sum(int(getattr(c, "nbytes", 0)) for c in cache)


def _trimmable(cache: list[Any]) -> bool:
    from mlx_lm.models.cache import can_trim_prompt_cache

    return bool(can_trim_prompt_cache(cache))


def _clone(cache: list[Any]) -> list[Any]:
    """Copies of the cache objects whose arrays are new array objects over the same buffers."""
    import mlx.core as mx
    from mlx.utils import tree_map

    def fresh(x: Any) -> Any:
        return x[...] if isinstance(x, mx.array) and x.ndim > 0 else x

    out = []
    for c in cache:
        twin = copy.copy(c)
        for name, value in vars(c).items():
            setattr(twin, name, tree_map(fresh, value, is_leaf=lambda v: isinstance(v, mx.array)))
        out.append(twin)
    return out


def _materialize(cache: list[Any]) -> None:
    """Evaluate every array the cache objects hold, here and now.

    MLX streams are thread-local (mlx 0.32): an array still waiting on an operation recorded on one
    thread's stream cannot be evaluated on another. A leaving row's cache is lazy (slices of the
    batch's), and a snapshot may be fetched by a later runner thread (after an unload) or read by
    the disk tier's writer, so it is evaluated on the thread that made it.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten

    arrays: list[Any] = []
    for c in cache:
        flat = tree_flatten(vars(c))
        assert isinstance(flat, list)  # the (path, leaf) list form, not the dict one
        arrays += [a for _, a in flat if isinstance(a, mx.array)]
    if arrays:
        mx.eval(arrays)


class PromptCache:
    def __init__(self, max_entries: int = 4, max_bytes: int = 2048 * 2**20, disk: DiskTier | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.disk = disk
        self.room: Callable[[int], int] | None = None  # the KV memory budget's room for this cache, given what it holds
        self._entries: list[_Entry] = []  # least recently used first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries)

    def snapshots(self, model: str | None = None) -> list[tuple[int, ...]]:
        """The token sequences held (of one model, or all), least recently used first (for tests)."""
        with self._lock:
            return [tuple(e.tokens) for e in self._entries if model is None or e.model == model]

    def clear(self, model: str | None = None) -> None:
        """Drop the snapshots in memory (of one model, or all); the disk tier keeps its files."""
        with self._lock:
            self._entries = [e for e in self._entries if model is not None and e.model != model]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the disk tier's pending writes; False on timeout."""
        return True if self.disk is None else self.disk.flush(timeout)

    def fetch(self, tokens: Sequence[int], model: str = "") -> tuple[list[Any] | None, int]:
        """A private, trimmed copy of the best snapshot for ``tokens`` and the reused length."""
        cache, n = self._fetch_memory(tokens, model)
        self._fit()  # a row starts: what it reserved of the budget may leave this cache less room
        if self.disk is not None:
            on_disk = self.disk.covered(model, tokens, len(tokens) - 1)
            if on_disk > n:  # reading a prefix back costs far less than computing it again
                loaded, m = self.disk.load(model, tokens, on_disk)
                if loaded is not None and m > n:
                    return loaded, m
        return cache, n

    def _fetch_memory(self, tokens: Sequence[int], model: str) -> tuple[list[Any] | None, int]:
        from mlx_lm.models.cache import trim_prompt_cache

        limit = len(tokens) - 1  # leave at least one token to prefill
        with self._lock:
            best: _Entry | None = None
            best_n = 0
            for entry in reversed(self._entries):  # most recent first: it wins ties
                if entry.model != model:
                    continue
                n = min(common_prefix(entry.tokens, tokens), limit)
                if n < len(entry.tokens) and not entry.trimmable:
                    continue
                if n > best_n:
                    best, best_n = entry, n
            if best is None:
                return None, 0
            self._entries.remove(best)
            self._entries.append(best)
            cache = _clone(best.cache)
        excess = len(best.tokens) - best_n
        if excess:
            trim_prompt_cache(cache, excess)
        return cache, best_n

    def store(self, tokens: Sequence[int], cache: list[Any], model: str = "") -> None:
        """Keep ``cache`` (holding exactly ``tokens``) as the most recent snapshot of ``model``."""
        if not tokens:
            return
        _materialize(cache)
        if self.disk is not None:
            self.disk.save(model, tokens, cache)
        if self.max_entries <= 0:
            return
        entry = _Entry(model, list(tokens), cache, _nbytes(cache), _trimmable(cache))
        if entry.nbytes > self._cap(self.nbytes):
            self._fit()
            return
        with self._lock:
            if entry.trimmable:  # a snapshot that is a prefix of this one is redundant now
                self._entries = [e for e in self._entries if e.model != model or not _is_prefix(e.tokens, entry.tokens)]
            self._entries.append(entry)
            while len(self._entries) > self.max_entries:
                self._entries.pop(0)
        self._fit()

    def _cap(self, held: int) -> int:
        """The most bytes this cache may hold now: its own bound, and the budget's room."""
        return self.max_bytes if self.room is None else min(self.max_bytes, self.room(held))

    def _fit(self) -> None:
        """Let the least recently used snapshots go until the cache is within its bound (device thread:
        a snapshot's arrays are freed here)."""
        held = self.nbytes
        cap = self._cap(held)
        if held <= cap:
            return
        with self._lock:
            while self._entries and sum(e.nbytes for e in self._entries) > cap:
                self._entries.pop(0)
