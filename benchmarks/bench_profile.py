"""Where a decode step's wall time goes: cProfile on the device thread and on the server's loop thread,
grouped into MLX and each part of ours (used by bench_steps.py ``--profile``).

cProfile profiles the thread that enables it: ``profiled`` enables one on the device thread (a
``DeviceWorker.run`` barrier) and one on the loop (a coroutine), and disables both after the block.
A function's own time (``tottime``) goes to the part its module belongs to; builtins by their name
(MLX's ``eval``/``async_eval``/``item`` are the time blocked on the device).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import pstats
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["part_of", "profiled", "split_report"]

# MLX's functions are not Python builtins to cProfile: the time blocked in eval/async_eval/item is the
# own time of the mlx-lm function that calls them (its ``_step``), with the graph it builds
_MLX = "MLX (mlx-lm's step: compute + its graph)"

# (substring of the file path, part): first match wins
_FILES = (
    ("tinytitan/engine/device/worker.py", "device worker (commands, admit, deliver)"),
    ("tinytitan/engine/device/sampling.py", "sampler"),
    ("tinytitan/engine/device/", "batch bookkeeping (MlxBatch)"),
    ("tinytitan/engine/job.py", "job (inbox, events)"),
    ("tinytitan/engine/models/mlx/backend.py", "detokenizer"),
    ("mlx_lm/tokenizer_utils", "detokenizer"),
    ("tokenizers", "detokenizer"),
    ("transformers", "detokenizer"),
    ("tinytitan/engine/output/", "parser"),
    ("tinytitan/engine/loops.py", "parser"),
    ("tinytitan/engine/queue.py", "job (inbox, events)"),
    ("tinytitan/api/sse.py", "SSE framing, keepalive"),
    ("tinytitan/api/streaming.py", "SSE framing, keepalive"),
    ("tinytitan/api/", "protocol encode"),
    ("msgspec", "protocol encode"),
    ("mlx_lm/", _MLX),
    ("mlx/", _MLX),
    ("litestar/", "HTTP (litestar, uvicorn, h11)"),
    ("uvicorn/", "HTTP (litestar, uvicorn, h11)"),
    ("h11/", "HTTP (litestar, uvicorn, h11)"),
    ("asyncio/", "event loop (tasks, hand-offs)"),
    ("/threading.py", "thread hand-offs"),
    ("/queue.py", "thread hand-offs"),
)


def part_of(filename: str, name: str, thread: str = "loop thread") -> str:
    """The part a function's own time (on ``thread``) belongs to."""
    if filename == "~":
        if "mlx.core" in name:
            return _MLX
        if "'send' of '_socket.socket'" in name and thread == "device thread":
            return "hand-off to the loop (self-pipe write, GIL wait)"
        if "'send' of '_socket.socket'" in name:
            return "HTTP socket write (GIL wait included)"
        if "epoll" in name or "select" in name:
            return "idle (loop waits for I/O)"
        if "_thread.lock" in name or "acquire" in name:
            return "idle (waits on a lock or queue)"
        if "msgspec" in name:
            return "protocol encode"
        if "socket" in name or "send" in name:
            return "HTTP (litestar, uvicorn, h11)"
        return "other builtins"
    for fragment, part in _FILES:
        if fragment in filename:
            return part
    return "other Python"


@contextlib.contextmanager
def profiled(device: Any, loop: asyncio.AbstractEventLoop) -> Iterator[dict[str, Any]]:
    """Profile the device thread and ``loop``'s thread during the block; yields what ``split_report`` reads."""
    found: dict[str, Any] = {"device thread": cProfile.Profile(), "loop thread": cProfile.Profile()}

    async def on_loop(enable: bool) -> None:
        (found["loop thread"].enable if enable else found["loop thread"].disable)()

    device.run(found["device thread"].enable).result()
    asyncio.run_coroutine_threadsafe(on_loop(True), loop).result()
    began = time.perf_counter()
    try:
        yield found
    finally:
        found["wall"] = time.perf_counter() - began
        asyncio.run_coroutine_threadsafe(on_loop(False), loop).result()
        device.run(found["device thread"].disable).result()


def top(found: dict[str, Any], thread: str, n: int = 25) -> None:
    """The ``n`` functions of most own time on ``thread`` (to check ``part_of``)."""
    pstats.Stats(found[thread]).sort_stats("tottime").print_stats(n)


def split_report(found: dict[str, Any], tokens: int) -> str:
    """Per thread: each part's own time in µs per token and as a share of the wall time."""
    wall = found["wall"]
    lines = [f"  wall {wall * 1e3:.0f} ms, {wall / max(tokens, 1) * 1e6:.0f} µs per token"]
    for thread in ("device thread", "loop thread"):
        stats = pstats.Stats(found[thread])
        parts: dict[str, float] = {}
        for (filename, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
            part = part_of(filename, name, thread)
            parts[part] = parts.get(part, 0.0) + row[2]
        lines.append(f"  {thread}:")
        for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
            if seconds / wall >= 0.005:
                lines.append(f"    {part:42s} {seconds / max(tokens, 1) * 1e6:7.1f} µs/token  {seconds / wall:6.1%}")
    return "\n".join(lines)
