"""A client that leaves mid-prefill, then the next request: its time to first token (issue 26, item 4).

    python benchmarks/bench_cancel.py [--prompt-tokens 4500] [--rounds 4] [--prefill-tokens 2000]

The embedded SmolLM2-135M-Instruct (its GGUF file) behind a live server, as ``serve`` runs it. A
streaming Chat Completions client sends a ~4,500-token prompt and leaves (closes the connection)
a little into the prompt's second prefill chunk; at once a second client asks "Say hi." and times
its first content token — the time the cancelled prompt still held the device, plus its own prefill.

- ``old``: the batch as it was (no layer watch): the cancelled chunk runs to its end;
- ``new``: the layer watch armed: the chunk is left after the layer that was running.

The two run back to back on the same loaded model. Then the prefill cost of the watch itself: the
a ~2,000-token prompt (``max_tokens`` 1, the prompt cache off) with the watch on and off, alternating
(off-on, on-off, …): the medians, and the median ratio of the pairs (robust to a busy machine).
Greedy throughout. Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas, openblas_active

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from tinytitan.engine.device.mlx_batch import PREFILL_ALONE, MlxBatch  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit  # noqa: E402
from tinytitan.testing.server import live_server  # noqa: E402

OFF = {"chat_template_kwargs": {"enable_thinking": False}}


def long_prompt(backend: MlxBackend, n_tokens: int, salt: str) -> str:
    """Numbered lines of plain prose, about ``n_tokens`` tokens (``salt`` keeps rounds apart)."""
    lines: list[str] = []
    i = 0
    while True:
        lines.append(f"{salt} line {i}: the keeper climbed the stairs and lit the lamp against the storm.")
        i += 1
        if i % 5 == 0 and len(backend.tokenizer.encode("\n".join(lines))) >= n_tokens:
            return "\n".join(lines) + "\nSummarise the lines above."


def body(backend: MlxBackend, text: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    return {
        "model": backend.info.id,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
        **OFF,
    }


def set_mode(batch: MlxBatch, watch: Any, new: bool) -> None:
    """``new``: the watch armed and the lone chunk capped; else the batch as it was before it."""
    batch.watch = watch if new else None
    cap = watch.chunk_cap() if new and watch is not None else None
    batch.prefill_alone = max(batch.prefill_step, min(PREFILL_ALONE, cap or PREFILL_ALONE))


def leaving_client(url: str, payload: dict[str, Any]) -> socket.socket:
    """A streaming POST on a raw socket, so that leaving is closing it (from any thread, any time)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(payload).encode()
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def cancelled_then_hi(url: str, backend: MlxBackend, batch: MlxBatch, text: str) -> dict[str, float]:
    """Leave ``text``'s prefill a little into its second chunk; then time "Say hi."'s first token."""
    steps_before = len(batch.steps)
    sent = time.perf_counter()
    sock = leaving_client(url, body(backend, text, 64, True))
    while not any(n > 0 for _rows, n, _s in list(batch.steps)[steps_before:]):  # the first chunk is done
        time.sleep(0.01)
    first_chunk = time.perf_counter() - sent
    delay = min(2.0, first_chunk / 10)
    time.sleep(delay)  # a little into the second chunk
    left = time.perf_counter()
    sock.shutdown(socket.SHUT_RDWR)  # the client leaves
    sock.close()
    first = None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body(backend, "Say hi.", 16, True), timeout=900) as r:
        for line in r.iter_lines():
            if '"content": "' in line and '"content": ""' not in line:
                first = time.perf_counter()
                break
    assert first is not None
    told = [t - left for t in CANCELS if t >= left]
    steps = [(rows, n, round(sec, 2)) for rows, n, sec in list(batch.steps)[steps_before:]]
    print(f"  cancel reached the worker {told[0] if told else float('nan'):.2f} s after leaving; steps {steps}")
    held = steps[1][2] - delay if len(steps) > 1 else float("nan")  # the step running when the client left
    return {"first_chunk_s": first_chunk, "held_s": held, "ttft_after_leaving_s": first - left}


CANCELS: list[float] = []  # when the server told the device worker to cancel a row


def watch_cancels(live: Any) -> None:
    device = live.engine.device
    cancel = device.cancel

    def noted(row: Any) -> None:
        CANCELS.append(time.perf_counter())
        cancel(row)

    device.cancel = noted


def prefill_s(url: str, backend: MlxBackend, text: str) -> float:
    started = time.perf_counter()
    r = httpx.post(url + "/v1/chat/completions", json=body(backend, text, 1, False), timeout=900)
    assert r.status_code == 200, r.text
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-tokens", type=int, default=4500)
    parser.add_argument("--rounds", type=int, default=4, help="watch on/off prefill pairs (0: none)")
    parser.add_argument("--prefill-tokens", type=int, default=2000, help="the prompt of the on/off pairs")
    args = parser.parse_args()
    path = embedded_gguf_or_exit()
    print(f"OpenBLAS preloaded: {openblas_active()}; model {path.name}", flush=True)
    backend = MlxBackend(str(path), prompt_cache_entries=0)
    backend.load()
    with live_server(backend) as live:
        prefill_s(live.url, backend, "Say hi.")  # opens the batch, warms up
        watch_cancels(live)
        batch = backend.batch
        assert isinstance(batch, MlxBatch) and batch.watch is not None
        watch = batch.watch
        print(f"layers {watch.layers}; lone chunk {batch.prefill_alone} tokens (cap {watch.chunk_cap()})", flush=True)
        for mode in ("old", "new"):
            set_mode(batch, watch, new=mode == "new")
            text = long_prompt(backend, args.prompt_tokens, f"[{mode}]")
            n = len(backend.tokenizer.encode(text))
            result = cancelled_then_hi(live.url, backend, batch, text)
            print(
                f"{mode}: {n}-token prompt, first chunk {result['first_chunk_s']:.1f} s; the client left, the "
                f"device was busy ~{result['held_s']:.2f} s more; 'Say hi.' first token "
                f"{result['ttft_after_leaving_s']:.2f} s after leaving",
                flush=True,
            )
        times: dict[str, list[float]] = {"off": [], "on": []}
        for round_ in range(args.rounds):
            for mode in ("off", "on") if round_ % 2 == 0 else ("on", "off"):  # drift falls on both
                set_mode(batch, watch, new=mode == "on")
                text = long_prompt(backend, args.prefill_tokens, f"[p{round_}{mode}]")
                times[mode].append(prefill_s(live.url, backend, text))
            print(f"prefill, watch off {times['off'][-1]:.2f} s, on {times['on'][-1]:.2f} s", flush=True)
        if args.rounds:
            off, on = statistics.median(times["off"]), statistics.median(times["on"])
            ratio = statistics.median(b / a for a, b in zip(times["off"], times["on"], strict=True))
            print(
                f"prefill of ~{args.prefill_tokens} tokens: watch off {off:.2f} s, on {on:.2f} s (medians); "
                f"median on/off of the pairs {ratio - 1:+.1%}"
            )
        set_mode(batch, watch, new=True)


if __name__ == "__main__":
    main()
