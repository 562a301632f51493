"""A stand-in for a fast device: decode where a step costs far less than our host work. Prints ratios.

    python benchmarks/bench_steps.py [--rows 1,4,8] [--tokens 256] [--rounds 5] [--head 8192] [--profile]
                                     [--client process|thread|both]

The model is ``tiny_model``'s ``tiny-1l`` shape (one layer, width 16, Qwen's real tokenizer) with its
LM head cut to the first ``--head`` token ids (the full vocabulary's head alone costs ~5 ms on this
CPU; ids past it are never sampled, so EOS never ends a row). A step then costs ~0.5 ms — what a
small model's step costs on a GPU — so what is ours per token shows. Per row count, in alternating
rounds, aggregate decode tok/s (tokens after every row has its first one ÷ the time to the last
row's end) of:

- **http**: the engine through the server (streaming Chat Completions over a real loopback socket,
  one raw-socket client thread per row), the client in a process of its own, as a real client is;
  **http-thread** (``--client thread`` or ``both``): the same client as threads of this process, whose
  Python then contends with the server's for this interpreter's lock (the figures before 2026-12-05);
- **engine**: the Engine alone (``Engine.prepare`` → ``Job.events()`` on the server's loop: detokenizer
  and parser included, no HTTP);
- **generate_step**: mlx-lm's ``generate_step`` (1 row) and **BatchGenerator**: mlx-lm's own batch
  generator (every row count) — both on our device thread, with the same model object. Once our
  batch has opened, mlx-lm's batch cache takes a lone row's step without a mask in this whole process
  (``tinytitan/engine/kv/masks.py``), so the BatchGenerator here has that fix too: at one row it steps
  as fast as ``generate_step`` (without it, 0.92×).

Ratios are paired within a round (the box is shared and noisy): best and median. Targets: engine ≥
0.95× generate_step at 1 row and ≥ 0.95× BatchGenerator at 4 and 8 rows; http ≥ 0.9×.

``--profile``: one more HTTP run per row count under cProfile on the device thread and on the
server's loop thread, with a step's wall time split between MLX (blocked in ``eval``/``async_eval``/
``item``, and mlx-lm's own Python) and each part of ours (µs per token; cProfile's overhead inflates
Python-heavy parts, so read shares, not absolute times). Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_profile import profiled, split_report

_CONTENT = re.compile(rb'"content":"[^"]')
Rate = tuple[float, int]  # (aggregate tok/s, tokens counted)


def cut_head(model: Any, head: int) -> None:
    """Give ``model`` an untied LM head over the first ``head`` token ids (on the device thread)."""
    import mlx.core as mx
    import mlx.nn as nn

    mx.random.seed(7)
    model.lm_head = nn.Linear(model.args.hidden_size, head, bias=False)
    model.args.tie_word_embeddings = False
    mx.eval(model.parameters())


def prompt_of(row: int, salt: int) -> list[int]:
    return [1000 + (row * 7919 + salt * 131 + i * 31) % 997 for i in range(32)]


def aggregate(firsts: list[float], end: float, tokens_after: int) -> Rate:
    t_all = max(firsts)
    return tokens_after / (end - t_all), tokens_after


def generate_step_rate(model: Any, n: int, salt: int) -> Rate:
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    steps = generate_step(mx.array(prompt_of(0, salt)), model, max_tokens=n, prompt_cache=make_prompt_cache(model))
    next(steps)
    t = time.perf_counter()
    k = sum(1 for _ in steps)
    return k / (time.perf_counter() - t), k


def batch_generator_rate(model: Any, rows: int, n: int, salt: int) -> Rate:
    from mlx_lm.generate import BatchGenerator

    gen = BatchGenerator(model, completion_batch_size=rows, prefill_batch_size=rows)
    try:
        gen.insert([prompt_of(r, salt) for r in range(rows)], max_tokens=[n] * rows)
        seen: set[int] = set()
        firsts: list[float] = []
        after = done = 0
        while done < rows:
            _prompts, responses = gen.next()
            now = time.perf_counter()
            for response in responses:
                if response.uid in seen:
                    after += 1
                else:
                    seen.add(response.uid)
                    firsts.append(now)
                done += response.finish_reason is not None
        return aggregate(firsts, time.perf_counter(), after)
    finally:
        gen.close()


def chat_body(model_id: str, row: int, salt: int, n: int) -> dict[str, Any]:
    return {
        "model": model_id,
        "messages": [{"role": "user", "content": f"Row {row}, round {salt}: tell me more."}],
        "max_tokens": n,
        "temperature": 0,
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def http_stream(
    port: int,
    body: dict[str, Any],
    firsts: list[float],
    ends: list[float],
    go: threading.Event,
    first_seen: Callable[[list[float]], None],
) -> None:
    """One streaming request over a raw socket: the time of its first content chunk, and of ``[DONE]``."""
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        go.wait()
        sock.sendall(head + payload)
        seen = b""
        first = False
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            seen = seen[-32:] + chunk
            if not first and _CONTENT.search(seen):  # text, not the role chunk's empty content
                first = True
                firsts.append(time.perf_counter())
                first_seen(firsts)
            if b"data: [DONE]" in seen:
                break
    ends.append(time.perf_counter())


def client_streams(
    port: int, bodies: list[dict[str, Any]], on_all_first: Callable[[], None]
) -> tuple[list[float], list[float]]:
    """Run one streaming request per body at once: ``on_all_first()`` once every stream has content;
    the times of each stream's first content chunk and of its end."""
    firsts: list[float] = []
    ends: list[float] = []
    go = threading.Event()
    lock = threading.Lock()

    def first_seen(mine: list[float]) -> None:  # under a lock: exactly one stream sees the count complete
        with lock:
            firsts.extend(mine)
            if len(firsts) == len(bodies):
                on_all_first()

    threads = [threading.Thread(target=http_stream, args=(port, body, [], ends, go, first_seen)) for body in bodies]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    return firsts, ends


def client_process(conn: Any) -> None:
    """The HTTP client in a process of its own (as a real client is): runs what ``conn`` sends."""
    while (job := conn.recv()) is not None:
        port, bodies = job
        firsts, ends = client_streams(port, bodies, lambda: conn.send("first"))
        conn.send((firsts, ends))


class Client:
    """Streams requests from a thread of this process, or (``separate``) from a process of its own,
    whose Python does not contend with the server's for this process's interpreter lock."""

    def __init__(self, separate: bool) -> None:
        self._process: Any = None
        if separate:
            import multiprocessing

            context = multiprocessing.get_context("spawn")
            self._conn, theirs = context.Pipe()
            self._process = context.Process(target=client_process, args=(theirs,), daemon=True)
            self._process.start()

    def run(self, port: int, bodies: list[dict[str, Any]], at_all_first: Callable[[], int]) -> tuple[float, int]:
        """(aggregate tok/s, tokens): tokens counted by ``at_all_first`` (the device's count) from the
        moment every stream had content to the last stream's end."""
        marks: list[int] = []
        if self._process is None:
            firsts, ends = client_streams(port, bodies, lambda: marks.append(at_all_first()))
        else:
            self._conn.send((port, bodies))
            assert self._conn.recv() == "first"
            marks.append(at_all_first())
            firsts, ends = self._conn.recv()
        assert len(firsts) == len(bodies), "a stream carried no content"
        generated = at_all_first() - marks[0]
        return generated / (max(ends) - max(firsts)), generated

    def close(self) -> None:
        if self._process is not None:
            self._conn.send(None)
            self._process.join(timeout=10)


async def engine_rows(engine: Any, rows: int, n: int, salt: int) -> Rate:
    from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta
    from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling

    firsts: list[float] = []
    counts = [0] * rows
    marks: list[int] = []

    async def one(row: int) -> None:
        req = ChatRequest(
            model=engine.info.id,
            messages=(Message("user", f"Row {row}, round {salt}: tell me more."),),
            max_tokens=n,
            sampling=Sampling(temperature=0.0),
            reasoning=ReasoningControls(enable_thinking=False),
            stream=True,
        )
        job = await engine.prepare(req)
        first = True
        async for event in job.events():
            if isinstance(event, (TextDelta, ReasoningDelta)) and first:
                first = False
                firsts.append(time.perf_counter())
                if len(firsts) == rows:
                    marks.append(engine.backend.tokens_generated)
            if isinstance(event, Finished):
                assert event.usage is not None
                counts[row] = event.usage.completion_tokens

    await asyncio.gather(*(one(r) for r in range(rows)))
    end = time.perf_counter()
    return (engine.backend.tokens_generated - marks[0]) / (end - max(firsts)), sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,4,8")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per row")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--head", type=int, default=8192, help="token ids the LM head covers")
    parser.add_argument("--profile", action="store_true", help="also split a step's wall time (cProfile)")
    parser.add_argument(
        "--client",
        choices=("process", "thread", "both"),
        default="process",
        help="where the HTTP client runs: a process of its own (as a real client), a thread of this one, or both",
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.rows.split(",")]

    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.settings import Settings
    from tinytitan.testing.server import live_server
    from tinytitan.testing.tiny_model import tiny_model_dir

    path = tiny_model_dir("tiny-1l", "float32")
    most = max(counts)
    backend = MlxBackend(str(path), max_concurrent=most, drafts=False)
    settings = Settings(queue_limit=most, max_concurrent=most, drafts=False)
    clients = {
        name: Client(separate=name == "http")
        for name, wanted in (("http", ("process", "both")), ("http-thread", ("thread", "both")))
        if args.client in wanted
    }
    with live_server(backend, settings=settings) as live, contextlib.ExitStack() as stack:
        for client in clients.values():
            stack.callback(client.close)
        engine, loop = live.engine, live.loop
        assert loop is not None
        device = engine.device
        device.activate(engine.info.id).result()
        model = backend._model
        device.run(lambda: cut_head(model, args.head)).result()

        def on_loop(coro: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, loop).result()

        def http(client: Client) -> Callable[[int, int], Rate]:
            return lambda rows, salt: client.run(
                live.port,
                [chat_body(engine.info.id, r, salt, args.tokens) for r in range(rows)],
                lambda: backend.tokens_generated,
            )

        paths: dict[str, Callable[[int, int], Rate]] = {
            **{name: http(client) for name, client in clients.items()},
            "engine": lambda rows, salt: on_loop(engine_rows(engine, rows, args.tokens, salt)),
            "generate_step": lambda rows, salt: device.run(
                lambda: generate_step_rate(model, args.tokens, salt)
            ).result(),
            "BatchGenerator": lambda rows, salt: device.run(
                lambda: batch_generator_rate(model, rows, args.tokens, salt)
            ).result(),
        }
        print(f"model {path.name}, head {args.head} ids; {args.tokens} tokens per row", flush=True)
        rates: dict[tuple[str, int], list[float]] = {}
        for round_ in range(args.rounds + 1):  # round 0 warms every path up
            for rows in counts:
                names = [n for n in paths if n != "generate_step" or rows == 1]
                order = names if round_ % 2 else names[::-1]  # alternate who goes first
                got = {name: paths[name](rows, round_ * 100 + rows)[0] for name in order}
                backend.prompt_cache.clear()
                if round_:
                    for name, rate in got.items():
                        rates.setdefault((name, rows), []).append(rate)
                print(
                    f"  round {round_}, {rows} rows: " + ", ".join(f"{k} {v:.0f}" for k, v in got.items()) + " tok/s",
                    flush=True,
                )
        for rows in counts:
            base = "generate_step" if rows == 1 else "BatchGenerator"
            for name, target in (("engine", 0.95), *((c, 0.9) for c in clients)):
                for against in [base] + (["BatchGenerator"] if rows == 1 else []):
                    paired = [a / b for a, b in zip(rates[(name, rows)], rates[(against, rows)], strict=True)]
                    best, median = max(paired), statistics.median(paired)
                    print(
                        f"{rows} rows: {name} ÷ {against}: best {best:.3f}, median {median:.3f}"
                        f"  (median tok/s {statistics.median(rates[(name, rows)]):.0f} vs "
                        f"{statistics.median(rates[(against, rows)]):.0f}; target ≥ {target})",
                        flush=True,
                    )
        if args.profile:
            for rows in counts:
                with profiled(device, loop) as profiles:
                    rate, tokens = paths[next(iter(clients))](rows, 9000 + rows)
                print(f"profile, http, {rows} rows ({rate:.0f} tok/s under cProfile, {tokens} tokens):")
                print(split_report(profiles, tokens))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
