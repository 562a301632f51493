"""Encoding cost per stream event, this checkout against another, for each protocol (issue 24 item 5).

    python benchmarks/bench_encode.py --against OLD_CHECKOUT [--rounds 7] [--events 400]

Each checkout runs in its own process (``--worker``, with that checkout first on ``sys.path``): a
protocol's encoder is fed one generation (reasoning deltas, text deltas, two tool calls, the finish)
and every frame it makes is put into its SSE ``data:`` text (``SSE.text()``), as the framing does.
Reported: µs per frame (the best of ``--rounds``), this checkout's, the other's, and new ÷ old.
No engine, no model, no server. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
PROTOCOLS = ("chat_completions", "anthropic", "responses")


def _events(n: int) -> list[Any]:
    from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall, Usage

    thinking = [ReasoningDelta(f"thought {i} ") for i in range(n // 4)]
    text = [TextDelta(f"wörd {i} ") for i in range(n - n // 4)]
    calls = [ToolCall("call_1", "read", '{"path": "a.py"}'), ToolCall("call_2", "grep", '{"q": "x"}')]
    return [*thinking, *text, *calls, Finished("tool_calls", Usage(100, 20, n, n // 4))]


def _encoder(protocol: str) -> Any:
    if protocol == "chat_completions":
        from tinytitan.api.chat_completions.encode import ChatStream

        return ChatStream("m", include_usage=True)
    if protocol == "anthropic":
        from tinytitan.api.anthropic.encode import MessagesStream

        return MessagesStream("m", request_id="req_1")
    from tinytitan.api.responses.encode import OutputBuilder, ResponsesStream, response_shell
    from tinytitan.api.responses.protocol import ResponsesRequest
    from tinytitan.engine.request import Sampling

    shell = response_shell(ResponsesRequest(model="m"), model="m", sampling=Sampling(), store=False)
    return ResponsesStream(OutputBuilder(shell), lambda _response: None)


def _one(protocol: str, events: list[Any]) -> tuple[float, int]:
    """Seconds to encode one generation, and how many frames it made."""
    start = time.perf_counter()
    encoder = _encoder(protocol)
    frames = list(encoder.start())
    for event in events:
        frames += encoder.feed(event)
    frames += encoder.end()
    for frame in frames:
        frame.text()
    return time.perf_counter() - start, len(frames)


def worker(rounds: int, n: int) -> dict[str, float]:
    events = _events(n)
    result = {}
    for protocol in PROTOCOLS:
        _one(protocol, events)  # warm-up: imports, caches
        best = min(_one(protocol, events) for _ in range(rounds))
        result[protocol] = best[0] / best[1] * 1e6
    return result


def measure(checkout: Path, rounds: int, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--rounds", str(rounds), "--events", str(n)]
    out = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout of TinyTitan (the old encoders), e.g. a git worktree of an older commit",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=400, help="engine events in the generation")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.rounds, args.events)))
        return
    new = measure(HERE, args.rounds, args.events)
    old = measure(args.against.resolve(), args.rounds, args.events) if args.against else None
    print(f"new: {HERE}" + (f"   old: {args.against.resolve()}" if args.against else ""))
    print(f"{'protocol':<18}{'new µs/frame':>14}{'old µs/frame':>14}{'new/old':>9}")
    for protocol in PROTOCOLS:
        line = f"{protocol:<18}{new[protocol]:>14.2f}"
        if old is not None:
            line += f"{old[protocol]:>14.2f}{new[protocol] / old[protocol]:>9.2f}"
        print(line)


if __name__ == "__main__":
    main()
