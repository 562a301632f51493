"""The journal on disk: replay, torn tails, checkpoints, permissions, the lock, and a real crash."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tinytitan.engine.memory import store as store_module
from tinytitan.engine.memory.journal import CHECKPOINT, JOURNAL, Journal, read_journal
from tinytitan.engine.memory.records import Record
from tinytitan.engine.memory.scope import Scope
from tinytitan.engine.memory.store import MemoryBank
from tinytitan.testing.process import REPO_ROOT

SCOPE = Scope("tinytitan", "ada", "/projects/app", "header")


def _set(bank: MemoryBank, key: str, value: str = "v", importance: int = 3) -> None:
    bank.store(SCOPE).set(key, value, importance=importance, tags=(), session="s")


def test_owner_only_permissions(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path / "mem")
    _set(bank, "a")
    where = tmp_path / "mem" / SCOPE.key
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    for name in (JOURNAL, "lock"):
        assert stat.S_IMODE((where / name).stat().st_mode) == 0o600
    journal = bank.store(SCOPE)._journal
    assert journal is not None
    journal.checkpoint(bank.store(SCOPE).records())
    assert stat.S_IMODE((where / CHECKPOINT).stat().st_mode) == 0o600


def test_a_torn_last_line_is_dropped_and_truncated_away(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path)
    _set(bank, "kept")
    bank.close()
    journal = tmp_path / SCOPE.key / JOURNAL
    whole = journal.read_bytes()
    with journal.open("ab") as f:
        f.write(b'{"op":"set","record":{"key":"torn","val')
    replay = read_journal(journal.parent)
    assert replay.torn and set(replay.records) == {"kept"}
    store = MemoryBank(tmp_path).store(SCOPE)
    assert journal.read_bytes() == whole  # the fragment is gone, so the next line starts clean
    store.set("next", "v", importance=3, tags=(), session=None)
    store.close()
    assert set(read_journal(journal.parent).records) == {"kept", "next"}


def test_an_unreadable_middle_line_is_skipped_not_fatal(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path)
    _set(bank, "a")
    bank.close()
    journal = tmp_path / SCOPE.key / JOURNAL
    with journal.open("ab") as f:
        f.write(b"garbage\n")
    bank = MemoryBank(tmp_path)
    _set(bank, "b")
    bank.close()
    replay = read_journal(journal.parent)
    assert replay.skipped == 1 and set(replay.records) == {"a", "b"}


def test_compaction_writes_a_checkpoint_and_starts_a_short_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "COMPACT_MIN_LINES", 10)
    bank = MemoryBank(tmp_path)
    for i in range(30):
        _set(bank, f"k{i % 3}", f"value {i}")
    bank.close()
    where = tmp_path / SCOPE.key
    assert (where / CHECKPOINT).exists()
    assert len((where / JOURNAL).read_bytes().splitlines()) < 12
    replay = read_journal(where)
    assert replay.seq >= 1
    assert {k: r.value for k, r in replay.records.items()} == {"k0": "value 27", "k1": "value 28", "k2": "value 29"}


def test_a_journal_older_than_its_checkpoint_is_ignored(tmp_path: Path) -> None:
    # the process stopped after writing checkpoint 1 and before starting the journal after it
    where = tmp_path / SCOPE.key
    journal = Journal.acquire(where)
    assert journal is not None
    journal.replay()
    journal.append({"op": "delete", "key": "a", "at": 0})
    journal.close()
    record = Record("a", "from the checkpoint", created=1.0, updated=1.0)
    (where / CHECKPOINT).write_text(json.dumps({"version": 1, "seq": 1, "records": [record.to_json()]}))
    replay = read_journal(where)
    assert replay.stale and replay.records["a"].value == "from the checkpoint"
    store = MemoryBank(tmp_path).store(SCOPE)
    assert store.get("a") is not None
    assert json.loads((where / JOURNAL).read_text().splitlines()[0])["seq"] == 1


def test_fsync_on_syncs_every_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    bank = MemoryBank(tmp_path, fsync=True)
    store = bank.store(SCOPE)
    before = len(synced)
    for i in range(3):
        store.set(f"k{i}", "v", importance=3, tags=(), session=None)
    assert len(synced) - before == 3
    bank.close()


_CHILD = textwrap.dedent(
    """
    import sys
    from tinytitan.engine.memory.scope import Scope
    from tinytitan.engine.memory.store import MemoryBank
    store = MemoryBank(sys.argv[1], fsync=True).store(Scope("tinytitan", "ada", "/projects/app", "header"))
    i = 0
    while True:
        store.set(f"k/{i}", "value " * 200 + str(i), importance=1 + i % 5, tags=("crash",), session="child")
        print(i, flush=True)  # acknowledged: on disk
        i += 1
    """
)


def test_sigkill_mid_write_loses_no_acknowledged_record(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True)
    assert child.stdout is not None
    acknowledged: list[int] = []
    for line in child.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) >= 200:
            break
    child.send_signal(signal.SIGKILL)  # while it keeps writing
    child.wait(timeout=30)
    acknowledged.extend(int(line) for line in child.stdout.read().split())
    assert child.returncode == -signal.SIGKILL
    # a write the kill interrupted leaves a torn tail; make sure replay meets one too
    with (tmp_path / SCOPE.key / JOURNAL).open("ab") as f:
        f.write(b'{"op":"set","record":{"key":"k/torn","value":"val')
    store = MemoryBank(tmp_path).store(SCOPE)  # the lock died with the child
    assert store.persistent
    keys = {r.key for r in store.records()}
    assert {f"k/{i}" for i in acknowledged} <= keys
    assert "k/torn" not in keys
    record = store.get(f"k/{acknowledged[-1]}")
    assert record is not None and record.value.endswith(str(acknowledged[-1])) and record.tags == ("crash",)
