"""Load: rounds of concurrent streaming clients against ``serve --stub``; server memory before, at
peak and after.

    python benchmarks/load.py [--clients 100] [--rounds 5] [--queue-limit 20]

Every client must end in a complete stream or a 429/529 with Retry-After (none may hang: each is
bounded by a timeout). Prints the tallies and RSS figures as ratios to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.testing.process import serve_stub_process
from tinytitan.testing.scripts import STUB_MODEL

SCRIPT = {"model": STUB_MODEL, "rules": [{"reply": {"text": " ".join(["token"] * 40), "chunk_delay_ms": 2}}]}
ROUTES = [
    (
        "/v1/chat/completions",
        {},
        lambda: {"model": STUB_MODEL, "stream": True, "messages": [{"role": "user", "content": "hi " * 200}]},
        b"data: [DONE]",
    ),
    (
        "/v1/responses",
        {},
        lambda: {"model": STUB_MODEL, "stream": True, "input": "hi " * 200},
        b"event: response.completed",
    ),
    (
        "/v1/messages",
        {"anthropic-version": "2023-06-01"},
        lambda: {
            "model": STUB_MODEL,
            "stream": True,
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi " * 200}],
        },
        b"event: message_stop",
    ),
]


async def one_round(url: str, clients: int, tally: Counter[str]) -> None:
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

        async def client(i: int) -> None:
            path, headers, body, end = ROUTES[i % len(ROUTES)]
            try:
                async with http.stream("POST", path, json=body(), headers=headers) as r:
                    data = await r.aread()
            except httpx.HTTPError:
                tally["transport error"] += 1
                return
            if r.status_code == 200 and end in data:
                tally["completed"] += 1
            elif r.status_code in (429, 529) and r.headers.get("retry-after"):
                tally["refused"] += 1
            else:
                tally[f"bad {r.status_code}"] += 1

        results = await asyncio.gather(
            *(asyncio.wait_for(client(i), 90) for i in range(clients)), return_exceptions=True
        )
        tally["hung"] += sum(isinstance(x, asyncio.TimeoutError) for x in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queue-limit", type=int, default=20)
    args = parser.parse_args()
    with serve_stub_process(SCRIPT, "--queue-limit", str(args.queue_limit)) as server:
        asyncio.run(one_round(server.url, 10, Counter()))  # warm up imports, pools, caches
        time.sleep(1)
        before = server.rss_bytes()
        peak = before
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.wait(0.02):
                peak = max(peak, server.rss_bytes())

        sampler = threading.Thread(target=sample)
        sampler.start()
        tally: Counter[str] = Counter()
        start = time.monotonic()
        per_round = []
        for _ in range(args.rounds):
            asyncio.run(one_round(server.url, args.clients, tally))
            per_round.append(server.rss_bytes())
        elapsed = time.monotonic() - start
        stop.set()
        sampler.join()
        time.sleep(2)
        after = server.rss_bytes()
        alive = server.alive
    mib = 2**20
    print(
        f"{args.rounds} rounds x {args.clients} concurrent streaming clients, queue limit {args.queue_limit}, "
        f"{elapsed:.1f} s"
    )
    print("outcomes:", dict(tally), f"(server alive: {alive})")
    print(f"RSS before {before / mib:.1f} MiB, peak {peak / mib:.1f} MiB, after {after / mib:.1f} MiB")
    print(f"peak/before {peak / before:.2f}x, after/before {after / before:.2f}x")
    print("RSS after each round (MiB):", " ".join(f"{r / mib:.1f}" for r in per_round))
    print(f"after/after-first-round {after / per_round[0]:.2f}x (steady state: no growth per round)")
    ok = alive and set(tally) <= {"completed", "refused", "hung"} and tally["hung"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
