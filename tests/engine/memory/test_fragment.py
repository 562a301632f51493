"""The instruction fragment: its bootstrap limits and ranking, and freezing per conversation."""

from __future__ import annotations

from pathlib import Path

from tinytitan.engine.memory.fragment import (
    BOOTSTRAP_BYTES,
    BOOTSTRAP_RECORDS,
    FragmentCache,
    build_fragment,
    conversation_id,
)
from tinytitan.engine.memory.scope import Scope
from tinytitan.engine.memory.store import MemoryBank
from tinytitan.engine.memory.tools import MEMORY_TOOL_NAMES

SCOPE = Scope("tinytitan", "ada", "/projects/app", "header")
ALL = tuple(sorted(MEMORY_TOOL_NAMES))


def _listing(fragment: str) -> list[str]:
    return [line for line in fragment.split("Saved entries", 1)[1].splitlines()[1:] if line.startswith("- ")]


def test_the_fragment_says_what_memory_is_and_how_to_use_it(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    text = build_fragment(store, ALL)
    for phrase in ("/projects/app", "stale", "memory_get", "memory_set", "Never save secrets", "none yet"):
        assert phrase in text
    words = len(text.split())
    assert 150 <= words <= 260, words
    minimal = build_fragment(store, ("memory_set", "memory_get", "memory_list"))
    assert "memory_search" not in minimal and "memory_delete" not in minimal
    assert "read-only" in build_fragment(store, ())


def test_500_records_never_exceed_the_bootstrap_limits(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    for i in range(500):
        value = f"fact number {i} " + "lorem ipsum dolor " * (i % 40)
        store.set(f"facts/{i:03d}", value, importance=1 + i % 5, tags=(), session=None)
    text = build_fragment(store, ALL)
    lines = _listing(text)
    listing = text.split("Saved entries", 1)[1]
    assert 0 < len(lines) <= BOOTSTRAP_RECORDS
    assert len(listing.encode()) <= BOOTSTRAP_BYTES
    assert f"of {len(store)}" in text
    # ranked by importance: every shown record is at least as important as any hidden one
    shown = {line.split(" [", 1)[0][2:] for line in lines}
    importance = {r.key: r.importance for r in store.records()}
    assert min(importance[k] for k in shown) >= max(i for k, i in importance.items() if k not in shown)


def test_big_values_hit_the_byte_limit_before_the_record_limit(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    for i in range(100):
        store.set(f"k{i:03d}/" + "x" * 150, "y" * 1000, importance=3, tags=(), session=None)
    text = build_fragment(store, ALL)
    assert len(text.split("Saved entries", 1)[1].encode()) <= BOOTSTRAP_BYTES
    assert len(_listing(text)) < BOOTSTRAP_RECORDS


def test_ties_go_to_the_older_fact(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    store.set("z/older", "old", importance=4, tags=(), session=None)
    store.set("a/newer", "new", importance=4, tags=(), session=None)
    store.set("m/low", "low", importance=2, tags=(), session=None)
    assert [line.split(" [")[0] for line in _listing(build_fragment(store, ALL))] == [
        "- z/older",
        "- a/newer",
        "- m/low",
    ]


def test_the_fragment_is_frozen_per_conversation(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    cache = FragmentCache(size=2)
    one = conversation_id(SCOPE.key, "system", "first question")
    first = cache.get_or_build(one, lambda: build_fragment(store, ALL))
    store.set("new/fact", "learned mid-conversation", importance=5, tags=(), session=None)
    assert cache.get_or_build(one, lambda: build_fragment(store, ALL)) == first
    two = conversation_id(SCOPE.key, "system", "another question")
    assert "new/fact" in cache.get_or_build(two, lambda: build_fragment(store, ALL))
    assert conversation_id("other/scope", "system", "first question") != one
    cache.get_or_build("c3", lambda: "x")  # the oldest conversation is forgotten past the size
    assert "new/fact" in cache.get_or_build(one, lambda: build_fragment(store, ALL))
