"""The memory store: one workspace's records in RAM, every change journaled before it is acknowledged.

``MemoryBank`` opens one ``MemoryStore`` per scope on first use, under
``<memory dir>/<namespace>/<user>/<workspace id>/``, and keeps it (and its journal lock) until the
server stops. When another process holds a workspace's journal, the store starts from what that
journal held and keeps its changes in RAM only; ``note`` says so, and the instruction fragment
passes it on to the model.

Retention: beyond ``max_records`` records or ``max_bytes`` of keys and values, the least important
records go first, the least recently updated among equals — never the one just written.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tinytitan.engine.memory.journal import Journal, read_journal
from tinytitan.engine.memory.records import MemoryToolError, Record
from tinytitan.engine.memory.scope import Scope

__all__ = ["MemoryBank", "MemoryStore", "Retention"]

log = logging.getLogger("tinytitan.memory")

COMPACT_MIN_LINES = 1000


@dataclass(frozen=True, slots=True)
class Retention:
    max_records: int = 5000
    max_bytes: int = 32 * 1024 * 1024


class MemoryStore:
    """One workspace's records. Thread-safe; every method may be called from any thread."""

    def __init__(
        self,
        scope: Scope,
        records: dict[str, Record],
        journal: Journal | None,
        *,
        retention: Retention = Retention(),
        note: str | None = None,
    ) -> None:
        self.scope = scope
        self.retention = retention
        self.note = note  # why this store is not persistent (None when it is)
        self._records = records
        self._bytes = sum(r.size for r in records.values())  # kept current by every write
        self._journal = journal
        self._lock = threading.Lock()

    @property
    def persistent(self) -> bool:
        return self._journal is not None

    def __len__(self) -> int:
        return len(self._records)

    # -- reads ------------------------------------------------------------------------------------
    def get(self, key: str) -> Record | None:
        with self._lock:
            record = self._records.get(key)
            return None if record is None else replace(record)

    def records(self) -> list[Record]:
        with self._lock:
            return [replace(r) for r in self._records.values()]

    # this method shadows the builtin in the class body: the annotations after it say builtins.list
    def list(self, prefix: str = "", limit: int = 50) -> tuple[list[Record], int]:
        """Records whose key starts with ``prefix``, by key; and how many matched in all."""
        with self._lock:
            found = sorted((r for r in self._records.values() if r.key.startswith(prefix)), key=lambda r: r.key)
        return [replace(r) for r in found[:limit]], len(found)

    def search(
        self,
        query: str = "",
        *,
        prefix: str = "",
        tags: tuple[str, ...] = (),
        min_importance: int = 1,
        limit: int = 10,
    ) -> tuple[builtins.list[Record], int]:
        """Records containing every word of ``query`` (key, value or tags; any case), best first."""
        words = [w for w in query.lower().split() if w]
        scored: list[tuple[int, Record]] = []
        with self._lock:
            for record in self._records.values():
                if not record.key.startswith(prefix) or record.importance < min_importance:
                    continue
                if any(t not in record.tags for t in tags):
                    continue
                haystack = " ".join((record.key, record.value, *record.tags)).lower()
                if not all(w in haystack for w in words):
                    continue
                scored.append((sum(haystack.count(w) for w in words), record))
        scored.sort(key=lambda s: (-s[0], -s[1].importance, -s[1].updated))
        return [replace(r) for _, r in scored[:limit]], len(scored)

    def ranked(self) -> builtins.list[Record]:
        """Most important first; among equals the older fact first (it has stood longer)."""
        with self._lock:
            return sorted((replace(r) for r in self._records.values()), key=lambda r: (-r.importance, r.created, r.key))

    # -- writes -----------------------------------------------------------------------------------
    def set(
        self, key: str, value: str, *, importance: int, tags: tuple[str, ...], session: str | None
    ) -> tuple[Record, builtins.list[str]]:
        """Write ``key`` (a rewrite keeps its created time); returns the record and any keys evicted."""
        with self._lock:
            now = time.time()
            old = self._records.get(key)
            record = Record(key, value, importance, tags, session, created=old.created if old else now, updated=now)
            self._write({"op": "set", "record": record.to_json()})
            self._records[key] = record
            self._bytes += record.size - (old.size if old else 0)
            evicted = self._enforce_retention(keep=key)
            self._maybe_compact()
            return replace(record), evicted

    def delete(self, key: str) -> bool:
        with self._lock:
            if key not in self._records:
                return False
            self._write({"op": "delete", "key": key, "at": time.time()})
            self._bytes -= self._records.pop(key).size
            self._maybe_compact()
            return True

    def close(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    # -- internals (lock held) ----------------------------------------------------------------------
    def _write(self, entry: dict[str, object]) -> None:
        if self._journal is None:
            return
        try:
            self._journal.append(entry)
        except OSError as exc:
            log.error("memory journal %s: write failed: %s", self._journal.path, exc)
            raise MemoryToolError(f"memory could not be saved: {exc.strerror or exc}") from None

    def _enforce_retention(self, *, keep: str) -> builtins.list[str]:
        limit = self.retention
        if len(self._records) <= limit.max_records and self._bytes <= limit.max_bytes:
            return []
        victims = sorted(
            (r for r in self._records.values() if r.key != keep), key=lambda r: (r.importance, r.updated, r.key)
        )
        evicted: list[str] = []
        for record in victims:
            if len(self._records) <= limit.max_records and self._bytes <= limit.max_bytes:
                break
            self._write({"op": "delete", "key": record.key, "at": time.time(), "why": "retention"})
            del self._records[record.key]
            self._bytes -= record.size
            evicted.append(record.key)
        if evicted:
            log.info("memory %s: retention evicted %d record(s)", self.scope.key, len(evicted))
        return evicted

    def _maybe_compact(self) -> None:
        journal = self._journal
        if journal is None or journal.lines <= max(COMPACT_MIN_LINES, 2 * len(self._records)):
            return
        try:
            journal.checkpoint(list(self._records.values()))
        except OSError as exc:  # the journal is still whole; try again after the next write
            log.error("memory %s: compaction failed: %s", self.scope.key, exc)


class MemoryBank:
    """Every workspace's store under one directory, opened on first use and held until ``close``."""

    def __init__(self, directory: str | Path, *, fsync: bool = False, retention: Retention = Retention()) -> None:
        self.directory = Path(directory)
        self.fsync = fsync
        self.retention = retention
        self._stores: dict[str, MemoryStore] = {}
        self._lock = threading.Lock()

    def store(self, scope: Scope) -> MemoryStore:
        with self._lock:
            store = self._stores.get(scope.key)
            if store is None:
                store = self._stores[scope.key] = self._open(scope)
            return store

    def close(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.close()
            self._stores.clear()

    def _private_parents(self, where: Path) -> None:
        """The namespace and per-user directories above a journal, owner-only like it: other local
        users must not list the workspaces. The memory directory itself is 0700 when created here."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for parent in reversed(where.relative_to(self.directory).parents[:-1]):
            level = self.directory / parent
            level.mkdir(exist_ok=True, mode=0o700)
            os.chmod(level, 0o700)  # also a directory an earlier version made 0755

    def _open(self, scope: Scope) -> MemoryStore:
        where = self.directory / scope.key
        try:
            self._private_parents(where)
            journal = Journal.acquire(where, fsync=self.fsync)
            if journal is None:
                records = read_journal(where).records
                log.warning("memory %s: another server holds %s; this one keeps memory in RAM only", scope.key, where)
                note = (
                    "Another TinyTitan server holds this workspace's memory journal, so nothing you save "
                    "here persists: it lasts only until this server stops."
                )
                return MemoryStore(scope, records, None, retention=self.retention, note=note)
            try:
                replay = journal.replay()
            except BaseException:
                journal.close()
                raise
        except (OSError, ValueError) as exc:
            log.error("memory %s: cannot open %s (%s); memory for it is kept in RAM only", scope.key, where, exc)
            note = "This workspace's memory journal could not be opened, so nothing you save here persists."
            return MemoryStore(scope, {}, None, retention=self.retention, note=note)
        log.info("memory %s: %d record(s) from %s", scope.key, len(replay.records), where)
        store = MemoryStore(scope, replay.records, journal, retention=self.retention)
        with store._lock:
            store._maybe_compact()
        return store
