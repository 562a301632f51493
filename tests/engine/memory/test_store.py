"""One workspace's store: reopening, a second server on the same directory, search, retention."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tinytitan.engine.memory.journal import read_journal
from tinytitan.engine.memory.scope import Scope
from tinytitan.engine.memory.store import MemoryBank, MemoryStore, Retention
from tinytitan.engine.memory.tools import run_tool

SCOPE = Scope("tinytitan", "ada", "/projects/app", "header")


def _set(bank: MemoryBank, key: str, value: str = "v", importance: int = 3) -> None:
    bank.store(SCOPE).set(key, value, importance=importance, tags=(), session="s")


def _ok(store: MemoryStore, name: str, **args: object) -> dict[str, Any]:
    text = run_tool(store, name, json.dumps(args), session="conv_1")
    assert not text.startswith("Error:"), text
    return json.loads(text)


def test_records_survive_a_reopen_and_a_rewrite_keeps_created(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path)
    _set(bank, "a", "one")
    first = bank.store(SCOPE).get("a")
    _set(bank, "a", "two", importance=5)
    _set(bank, "b")
    bank.store(SCOPE).delete("b")
    bank.close()
    again = MemoryBank(tmp_path).store(SCOPE)
    record = again.get("a")
    assert record is not None and first is not None
    assert (record.value, record.importance, record.session) == ("two", 5, "s")
    assert record.created == first.created and record.updated >= first.updated
    assert again.get("b") is None and len(again) == 1


def test_a_second_bank_on_the_same_directory_runs_without_persistence(tmp_path: Path) -> None:
    first = MemoryBank(tmp_path)
    _set(first, "shared", "from the first server")
    second = MemoryBank(tmp_path)
    store = second.store(SCOPE)
    assert not store.persistent and store.note is not None and "persists" in store.note
    assert store.get("shared") is not None  # it starts from what the journal held
    store.set("only-in-ram", "x", importance=3, tags=(), session=None)
    second.close()
    first.close()
    assert set(read_journal(tmp_path / SCOPE.key).records) == {"shared"}


def test_retention_evicts_the_least_important_and_reports_it(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path, retention=Retention(max_records=3)).store(SCOPE)
    _ok(store, "memory_set", key="keep/high", value="v", importance=5)
    _ok(store, "memory_set", key="drop/low", value="v", importance=1)
    _ok(store, "memory_set", key="keep/mid", value="v", importance=3)
    saved = _ok(store, "memory_set", key="keep/new", value="v", importance=1)
    assert saved["evicted"] == ["drop/low"]
    assert sorted(r.key for r in store.records()) == ["keep/high", "keep/mid", "keep/new"]


def test_retention_by_bytes(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path, retention=Retention(max_bytes=3000)).store(SCOPE)
    for i in range(5):
        _ok(store, "memory_set", key=f"k{i}", value="x" * 1000)
    assert sum(r.size for r in store.records()) <= 3000 and store.get("k4") is not None


def test_search_ranks_by_hits_then_importance(tmp_path: Path) -> None:
    store = MemoryBank(tmp_path).store(SCOPE)
    store.set("a", "build build build", importance=1, tags=(), session=None)
    store.set("b", "build once", importance=5, tags=(), session=None)
    store.set("c", "build once too", importance=2, tags=(), session=None)
    store.set("d", "unrelated", importance=5, tags=(), session=None)
    found, total = store.search("BUILD")
    assert [r.key for r in found] == ["a", "b", "c"] and total == 3
    found, total = store.search("build", limit=1)
    assert len(found) == 1 and total == 3
    assert store.search("build once", prefix="c")[1] == 1


def test_the_directories_above_a_journal_are_owner_only(tmp_path: Path) -> None:
    """Issue 28.5: other local users cannot list the users or workspaces under the memory directory."""
    umask = os.umask(0o022)
    try:
        (tmp_path / "old" / "tinytitan").mkdir(parents=True)  # as an earlier version left it: 0755
        MemoryBank(tmp_path / "old").store(SCOPE)
        MemoryBank(tmp_path / "new").store(SCOPE)
    finally:
        os.umask(umask)
    for root in ("old", "new"):
        for level in ("tinytitan", "tinytitan/ada", SCOPE.key):
            assert stat.S_IMODE((tmp_path / root / level).stat().st_mode) == 0o700, (root, level)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700  # a memory directory it made itself
    assert stat.S_IMODE((tmp_path / "old").stat().st_mode) == 0o755  # one the user made is left as it is
