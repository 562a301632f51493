"""One owner of the device: a serving process's thread count does not grow with its requests.

The device worker is the only thread that generates, and rendering runs on a fixed CPU pool
started whole, so 8 streams at once run on exactly the threads 1 stream runs on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import psutil

from tinytitan.testing.process import ServerProcess, serve_stub_process
from tinytitan.testing.scripts import script

SLOW = script({"reply": {"text": " ".join(["word"] * 400), "chunk_delay_ms": 100}})


@contextmanager
def streams(server: ServerProcess, n: int) -> Iterator[None]:
    """``n`` Chat Completions streams open and past their first delta for the block."""
    started = threading.Barrier(n + 1, timeout=120)
    body = {"model": "stub-model", "messages": [{"role": "user", "content": "talk"}], "stream": True}

    def read(client: httpx.Client) -> None:
        with client.stream("POST", server.v1 + "/chat/completions", json=body) as response:
            lines = response.iter_lines()
            while '"content"' not in next(lines):
                pass
            started.wait()
            started.wait()  # hold the stream until the block ends

    with ExitStack() as stack:
        clients = [stack.enter_context(httpx.Client(timeout=120)) for _ in range(n)]
        workers = [threading.Thread(target=read, args=(c,), daemon=True) for c in clients]
        for worker in workers:
            worker.start()
        started.wait()
        try:
            yield
        finally:
            started.wait()
            for worker in workers:
                worker.join(30)


def test_eight_streams_run_on_the_threads_one_stream_runs_on() -> None:
    with serve_stub_process(SLOW, "--max-concurrent", "8", "--queue-limit", "8") as server:
        process = psutil.Process(server.process.pid)
        with streams(server, 2):
            pass  # warm: libraries that start a native thread once, on first use (OpenBLAS's server)
        counts = []
        for n in (1, 8, 1, 8):
            with streams(server, n):
                counts.append(process.num_threads())
        assert len(set(counts)) == 1, f"threads with 1, 8, 1, 8 streams: {counts}"
