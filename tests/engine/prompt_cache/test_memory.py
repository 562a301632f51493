"""The prompt cache: longest exact prefix, trimmed copies, LRU bounds (reference §13)."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mlx_lm.models.cache import ArraysCache, KVCache

from tinytitan.engine.device import thread as device_thread
from tinytitan.engine.prompt_cache.memory import PromptCache, common_prefix

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker


def kv(tokens: list[int], layers: int = 2) -> list[Any]:
    """A KV cache whose key at position i holds the token id (so contents are checkable)."""
    caches = []
    for _ in range(layers):
        c = KVCache()
        x = mx.array(tokens, dtype=mx.float32).reshape(1, 1, len(tokens), 1)
        c.update_and_fetch(x, x)
        caches.append(c)
    return caches


def contents(cache: list[Any] | None) -> list[int]:
    assert cache is not None
    keys, _values = cache[0].keys_and_values()
    return [int(v) for v in keys.reshape(-1).tolist()]


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    long = list(range(1000))
    assert common_prefix(long, [*long[:700], -1]) == 700
    assert common_prefix(long, long) == 1000


def test_miss_on_empty_cache() -> None:
    assert PromptCache().fetch([1, 2, 3]) == (None, 0)


def test_longest_prefix_wins_and_is_trimmed() -> None:
    pc = PromptCache()
    pc.store([1, 2, 3, 9, 9], kv([1, 2, 3, 9, 9]))
    pc.store([1, 2, 7], kv([1, 2, 7]))
    cache, n = pc.fetch([1, 2, 3, 4, 5, 6])
    assert n == 3
    assert cache is not None and cache[0].offset == 3
    assert contents(cache) == [1, 2, 3]


def test_trimmed_copy_leaves_the_snapshot_intact() -> None:
    pc = PromptCache()
    pc.store([1, 2, 3, 4], kv([1, 2, 3, 4]))
    cache, n = pc.fetch([1, 2, 8, 8])
    assert n == 2
    x = mx.array([8.0, 8.0]).reshape(1, 1, 2, 1)
    for c in cache or ():
        c.update_and_fetch(x, x)  # the new generation writes over positions 2..3
    assert contents(cache) == [1, 2, 8, 8]
    again, n2 = pc.fetch([1, 2, 3, 4, 5])
    assert n2 == 4 and contents(again) == [1, 2, 3, 4]


def test_at_least_one_prompt_token_is_left_to_prefill() -> None:
    pc = PromptCache()
    pc.store([1, 2, 3], kv([1, 2, 3]))
    cache, n = pc.fetch([1, 2, 3])
    assert n == 2 and cache is not None and cache[0].offset == 2
    assert pc.fetch([1]) == (None, 0)


def test_lru_evicts_by_entry_count() -> None:
    pc = PromptCache(max_entries=2)
    pc.store([1, 1], kv([1, 1]))
    pc.store([2, 2], kv([2, 2]))
    pc.fetch([1, 1, 5])  # touch [1, 1]
    pc.store([3, 3], kv([3, 3]))
    assert pc.snapshots() == [(1, 1), (3, 3)]


def test_byte_bound() -> None:
    one = kv([1, 2])
    size = sum(c.nbytes for c in one)
    pc = PromptCache(max_entries=10, max_bytes=2 * size)
    pc.store([1, 2], one)
    pc.store([3, 4], kv([3, 4]))
    pc.store([5, 6], kv([5, 6]))
    assert pc.snapshots() == [(3, 4), (5, 6)]
    assert pc.nbytes <= 2 * size
    tiny = PromptCache(max_bytes=size - 1)
    tiny.store([1, 2], kv([1, 2]))
    assert len(tiny) == 0


def test_a_prefix_snapshot_is_subsumed_by_its_extension() -> None:
    pc = PromptCache()
    pc.store([1, 2], kv([1, 2]))
    pc.store([1, 2, 3, 4], kv([1, 2, 3, 4]))
    assert pc.snapshots() == [(1, 2, 3, 4)]


def test_disabled_cache_keeps_nothing() -> None:
    pc = PromptCache(max_entries=0)
    pc.store([1, 2], kv([1, 2]))
    assert len(pc) == 0


@pytest.mark.parametrize("prompt, reused", [([1, 2, 3, 4], 3), ([1, 2, 9], 0)])
def test_untrimmable_state_is_reused_only_whole(prompt: list[int], reused: int) -> None:
    state = ArraysCache(1)
    state[0] = mx.zeros((1, 3))
    pc = PromptCache()
    pc.store([1, 2, 3], [state])
    cache, n = pc.fetch(prompt)
    assert n == reused
    assert (cache is None) == (reused == 0)


def test_a_snapshot_made_on_one_thread_is_usable_on_another() -> None:
    # MLX streams are thread-local: a snapshot still lazy on the thread that stored it (a batch
    # runner that has since closed) could not be evaluated by the next runner thread
    import threading

    cache = PromptCache()

    def store() -> None:
        device_thread.claim()  # one runner's device thread, then the next one's
        cache.store(list(range(6)), kv(list(range(6))))

    stored = threading.Thread(target=store)
    stored.start()
    stored.join()
    result: list[Any] = []

    def use() -> None:
        device_thread.claim()
        got, n = cache.fetch(list(range(8)))
        result.append((n, contents(got)))

    reader = threading.Thread(target=use)
    reader.start()
    reader.join()
    assert result == [(6, list(range(6)))]


def test_within_the_kv_memory_budget_the_oldest_snapshots_go_first() -> None:
    """With a budget (``--max-kv-memory``) the cache holds what the rows leave (``room``): a row that
    starts from it, or a snapshot stored, lets the least recently used snapshots go."""
    pc = PromptCache(max_entries=8)
    one = sum(c.nbytes for c in kv([1, 2, 3, 4]))
    left = {"room": 10 * one}
    pc.room = lambda held: left["room"]
    for first in (10, 20, 30):
        pc.store([first, 2, 3, 4], kv([first, 2, 3, 4]))
    assert len(pc) == 3
    left["room"] = 2 * one  # rows were admitted: room for two snapshots
    cache, n = pc.fetch([30, 2, 3, 4, 5])  # a row starts from the newest
    assert n == 4 and contents(cache) == [30, 2, 3, 4]
    assert pc.snapshots() == [(20, 2, 3, 4), (30, 2, 3, 4)]
    left["room"] = one
    pc.store([40, 2, 3, 4], kv([40, 2, 3, 4]))
    assert pc.snapshots() == [(40, 2, 3, 4)]
    left["room"] = one - 1
    pc.store([50, 2, 3, 4], kv([50, 2, 3, 4]))  # not even one fits: nothing is kept
    assert pc.snapshots() == [] and pc.nbytes == 0
