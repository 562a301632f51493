"""One workspace's memory on disk: an append-only NDJSON journal, a checkpoint and a lock file.

    <dir>/journal.ndjson   {"op": "begin", "seq": N, ...} then one {"op": "set" | "delete"} per line
    <dir>/checkpoint.json  every live record as of checkpoint N (written atomically: tmp → rename)
    <dir>/lock             held with an exclusive ``flock`` while a server has the journal open

Replay reads the checkpoint, then the journal lines after it. A last line without its newline is a
write the process did not finish (a crash, a full disk): it is dropped, and truncated away when the
journal is held for writing. A journal whose ``begin`` names an older checkpoint is stale — the
process stopped between writing a checkpoint and starting the journal after it — and is ignored.
Files are created owner-only (0600, directory 0700). ``fsync`` syncs every append; a checkpoint is
always synced before it replaces anything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinytitan.engine.memory.records import Record

__all__ = ["Journal", "Replay", "read_journal"]

log = logging.getLogger("tinytitan.memory")

JOURNAL = "journal.ndjson"
CHECKPOINT = "checkpoint.json"
LOCK = "lock"
FORMAT = 1


@dataclass(slots=True)
class Replay:
    """What a journal replays to: the live records, the checkpoint generation, and what it skipped."""

    records: dict[str, Record]
    seq: int = 0
    lines: int = 0  # journal lines applied (drives compaction)
    good_bytes: int = 0  # journal length up to the last whole line
    torn: bool = False  # a last line without its newline was dropped
    stale: bool = False  # the journal predates the checkpoint and was ignored
    skipped: int = 0  # whole lines that did not parse (logged)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be opened
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _apply(records: dict[str, Record], entry: dict[str, Any]) -> None:
    op = entry.get("op")
    if op == "set":
        record = Record.from_json(entry["record"])
        records[record.key] = record
    elif op == "delete":
        records.pop(str(entry["key"]), None)
    elif op != "begin":
        raise ValueError(f"unknown op {op!r}")


def read_journal(directory: Path) -> Replay:
    """Replay ``directory``'s checkpoint and journal without changing anything on disk."""
    records: dict[str, Record] = {}
    seq = 0
    checkpoint = directory / CHECKPOINT
    if checkpoint.exists():
        data = json.loads(checkpoint.read_text(encoding="utf-8"))
        seq = int(data.get("seq", 0))
        for item in data.get("records", []):
            record = Record.from_json(item)
            records[record.key] = record
    replay = Replay(records, seq)
    try:
        raw = (directory / JOURNAL).read_bytes()
    except FileNotFoundError:
        return replay
    end = raw.rfind(b"\n") + 1
    replay.good_bytes = end
    replay.torn = end < len(raw)
    if replay.torn:
        log.warning("memory journal %s: dropping a torn last line (%d bytes)", directory / JOURNAL, len(raw) - end)
    for number, line in enumerate(raw[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if entry.get("op") == "begin" and int(entry.get("seq", 0)) < seq:
                replay.stale = True
                log.warning("memory journal %s predates its checkpoint; ignoring it", directory / JOURNAL)
                return replay
            _apply(records, entry)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            replay.skipped += 1
            log.warning("memory journal %s line %d is unreadable (%s); skipped", directory / JOURNAL, number, exc)
            continue
        replay.lines += 1
    return replay


class Journal:
    """The journal of one workspace, held for writing. ``acquire`` returns None when another
    process holds it (that server then keeps its memory in RAM only)."""

    def __init__(self, directory: Path, lock_fd: int, *, fsync: bool) -> None:
        self.directory = directory
        self.fsync = fsync
        self._lock_fd = lock_fd
        self._fd: int | None = None
        self.seq = 0
        self.lines = 0

    @classmethod
    def acquire(cls, directory: Path, *, fsync: bool = False) -> Journal | None:
        import fcntl

        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return cls(directory, fd, fsync=fsync)

    @property
    def path(self) -> Path:
        return self.directory / JOURNAL

    def replay(self) -> Replay:
        """Load everything, repair what a crash left (torn tail, stale journal), open for appends."""
        replay = read_journal(self.directory)
        self.seq = replay.seq
        if replay.stale or not self.path.exists():
            self._start_journal(replay.seq)
        else:
            if replay.torn:
                os.truncate(self.path, replay.good_bytes)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            os.chmod(self.path, 0o600)
            self.lines = replay.lines
        return replay

    def append(self, entry: dict[str, Any]) -> None:
        """Write one line; with ``fsync`` on it is on disk when this returns."""
        assert self._fd is not None, "replay() first"
        data = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)
        self.lines += 1

    def checkpoint(self, records: Iterable[Record]) -> None:
        """Write every live record as checkpoint ``seq + 1`` and start an empty journal after it."""
        seq = self.seq + 1
        body = {"version": FORMAT, "seq": seq, "records": [r.to_json() for r in records]}
        self._write_atomic(self.directory / CHECKPOINT, json.dumps(body, ensure_ascii=False).encode())
        self.seq = seq
        self._start_journal(seq)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    # -- internals --------------------------------------------------------------------------------
    def _start_journal(self, seq: int) -> None:
        header = json.dumps({"op": "begin", "seq": seq, "version": FORMAT}) + "\n"
        self._write_atomic(self.path, header.encode())
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.lines = 0

    def _write_atomic(self, target: Path, data: bytes) -> None:
        tmp = target.with_name(target.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        _fsync_dir(self.directory)
