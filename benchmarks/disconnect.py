"""Time from a client disconnect to a free slot (target < 100 ms).

    python benchmarks/disconnect.py [--trials 30]

A live server in this process (so the queue can be watched directly): a streaming client reads
one delta of a slow generation and vanishes; the clock runs from closing the socket until the
queue shows the slot free. Also: a queued client that vanishes, and the time until the NEXT request
gets its first byte. Prints median / p95 / max in ms and the ratio to the 100 ms target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

TARGET_MS = 100.0
SLOW = script(
    {"when": {"user_contains": "slow"}, "reply": {"text": " ".join(["word"] * 2000), "chunk_delay_ms": 20}},
    {"reply": {"text": "ok"}},
)


def body(text: str) -> dict[str, object]:
    return {"model": STUB_MODEL, "stream": True, "messages": [{"role": "user", "content": text}]}


def wait(predicate: Callable[[], bool], limit: float = 10.0) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > limit:
            raise RuntimeError("the slot never freed")
        time.sleep(0.0002)
    return time.perf_counter()


def mid_stream(live: LiveServer) -> tuple[float, float]:
    url = live.v1 + "/chat/completions"
    with httpx.Client(timeout=30) as http, http.stream("POST", url, json=body("slow")) as r:
        lines = r.iter_lines()
        next(line for line in lines if "word" in line)
        t0 = time.perf_counter()
        # leaving the block closes the socket
    freed = wait(lambda: live.engine.queue.running == 0)
    with httpx.stream("POST", url, json=body("next"), timeout=30) as nxt:
        next(nxt.iter_lines())
        first_byte = time.perf_counter()
    return (freed - t0) * 1000, (first_byte - t0) * 1000


def summary(name: str, values: list[float]) -> None:
    ordered = sorted(values)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    med = statistics.median(ordered)
    print(
        f"{name}: median {med:.1f} ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms "
        f"(median/target {med / TARGET_MS:.2f}, max/target {ordered[-1] / TARGET_MS:.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    freed, next_byte = [], []
    with live_server(StubBackend(SLOW), queue_limit=0) as live:
        mid_stream(live)  # warm up
        for _ in range(args.trials):
            a, b = mid_stream(live)
            freed.append(a)
            next_byte.append(b)
    print(f"{args.trials} mid-stream disconnects, target < {TARGET_MS:.0f} ms")
    summary("disconnect -> slot free", freed)
    summary("disconnect -> next request's first byte", next_byte)
    return 0 if max(freed) < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
