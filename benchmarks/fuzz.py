"""Fuzz every POST route of ``tinytitan serve --stub`` for a long run (the CI test does 5,000).

    python benchmarks/fuzz.py --requests 50000 [--seed N]

Prints the status histogram, the rate and any problem (a 5xx, a wrong envelope, a transport error,
a chat stream without [DONE]); exits 1 if there was one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.testing.fuzz import FUZZ_SCRIPT, fuzz
from tinytitan.testing.process import serve_stub_process
from tinytitan.testing.scripts import STUB_MODEL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with serve_stub_process(FUZZ_SCRIPT) as server:
        start = time.monotonic()
        report = fuzz(server.url, requests=args.requests, model=STUB_MODEL, seed=args.seed)
        elapsed = time.monotonic() - start
        alive = server.alive
        rss = server.rss_bytes() / 2**20 if alive else 0.0
    print(f"requests sent: {report.sent} in {elapsed:.1f} s ({report.sent / elapsed:.0f} req/s)")
    print("statuses:", dict(sorted(report.statuses.items())))
    print(f"5xx: {report.server_errors}; problems: {len(report.problems)}; server alive: {alive}; RSS {rss:.0f} MiB")
    for problem in report.problems:
        print("  -", problem[:500])
    return 0 if alive and not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
