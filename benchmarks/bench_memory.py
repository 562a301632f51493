"""The memory store's costs (issue #16), as ratios measured back to back in one process.

    python benchmarks/bench_memory.py [--records 2000] [--rounds 3]

- fsync: ``memory_set`` writes per second with ``--memory-fsync`` ÷ without (the price of
  losing nothing on a power cut);
- replay: opening a workspace whose journal holds ``--records`` writes ÷ opening the same records
  from a checkpoint (what compaction buys at start-up);
- the fragment: building the instruction fragment over ``--records`` records, in ms (it is built
  once per conversation, then frozen).

The directory is a temporary one on the same filesystem as $TMPDIR. Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import statistics
import tempfile
import time

from tinytitan.engine.memory import store as store_module
from tinytitan.engine.memory.fragment import build_fragment
from tinytitan.engine.memory.scope import Scope
from tinytitan.engine.memory.store import MemoryBank
from tinytitan.engine.memory.tools import MEMORY_TOOL_NAMES

SCOPE = Scope("tinytitan", "bench", "/bench/project", "header")


def writes_per_second(directory: Path, n: int, *, fsync: bool) -> float:
    bank = MemoryBank(directory, fsync=fsync)
    store = bank.store(SCOPE)
    start = time.perf_counter()
    for i in range(n):
        store.set(f"facts/{i % 500}", f"fact {i}: " + "lorem ipsum " * 20, importance=1 + i % 5, tags=(), session="s")
    elapsed = time.perf_counter() - start
    bank.close()
    return n / elapsed


def open_seconds(directory: Path) -> float:
    start = time.perf_counter()
    bank = MemoryBank(directory)
    bank.store(SCOPE)
    elapsed = time.perf_counter() - start
    bank.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fsync_ratios, replay_ratios, fragment_ms = [], [], []
    store_module.COMPACT_MIN_LINES = 10**9  # measure a long journal, not an early checkpoint
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            plain = writes_per_second(base / "plain", args.records, fsync=False)
            synced = writes_per_second(base / "synced", max(50, args.records // 10), fsync=True)
            fsync_ratios.append(synced / plain)
            journal_open = open_seconds(base / "plain")
            bank = MemoryBank(base / "plain")
            store = bank.store(SCOPE)
            journal = store._journal
            assert journal is not None  # this process holds the journal: the store is persistent
            journal.checkpoint(store.records())
            bank.close()
            checkpoint_open = open_seconds(base / "plain")
            replay_ratios.append(journal_open / checkpoint_open)
            bank = MemoryBank(base / "plain")
            store = bank.store(SCOPE)
            start = time.perf_counter()
            build_fragment(store, tuple(sorted(MEMORY_TOOL_NAMES)))
            fragment_ms.append((time.perf_counter() - start) * 1000)
            bank.close()
    print(f"memory_set writes/s, fsync on ÷ off:            {statistics.median(fsync_ratios):.3f}")
    print(f"open: {args.records}-write journal ÷ checkpoint: {statistics.median(replay_ratios):.2f}")
    print(f"fragment over 500 records:                     {statistics.median(fragment_ms):.2f} ms")
    print(f"(plain writes/s in the last round: {plain:.0f})")


if __name__ == "__main__":
    main()
