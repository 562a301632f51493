"""Benchmarks for the mlx sampler (issue #11 item 6), printing ratios.

    python benchmarks/bench_sampling.py [--only a,b] [--rounds 5] [--decode 32]

(a) per-token sampler cost at Qwen3's defaults (temperature 0.6, top_p 0.95, top_k 20) on
    log-probabilities of the real vocabulary size (151,936, shaped like a language model's: a
    Zipf-like fall-off) — target ≤ 1 ms — against mlx-lm's ``make_sampler`` in the same run; plus,
    for context, the other paths of our sampler (top-k only, no top-k, plain temperature, greedy);
(b) server decode tok/s at the model's default sampling ÷ greedy on the Qwen3-0.6B-shape model
    (random weights), through the real server (streaming Chat Completions over a loopback socket)
    — target ≥ 0.95 — and the same with mlx-lm's sampler swapped back in, and with our sampler at
    top_k 1 (greedy's tokens: the sampler's own cost without the cost of streaming different text;
    random weights make sampled text far more varied than a real model's); also on the tiny model
    (hidden 64), where the sampler's cost shows most.

Times are wall-clock per call (mlx evaluated each time), with the process's CPU time beside them
(less sensitive to other processes on a shared machine); (b) also gives the ratio in tokens per
CPU-second (CPU time of the whole request, prefill included, over the tokens it generated).
Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tinytitan.cpu_blas import ensure_openblas, openblas_active

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any, TypedDict  # noqa: E402

from bench_mlx import server_decode, words  # noqa: E402

from tinytitan.engine.device.sampling import Sampler, make_sampler  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import Sampling  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402

VOCAB = 151_936


class Defaults(TypedDict):
    temperature: float
    top_k: int
    top_p: float


QWEN: Defaults = {"temperature": 0.6, "top_k": 20, "top_p": 0.95}
MakeSampler = Callable[[Sampling], Callable[[Any], Any]]


def lm_logprobs(count: int, exponent: float) -> list[Any]:
    """``count`` float32 (1, VOCAB) log-probability rows, rank^-exponent shaped, each shuffled."""
    import mlx.core as mx
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for _ in range(count):
        logits = -exponent * np.log(np.arange(1, VOCAB + 1)) + rng.normal(0, 0.05, VOCAB)
        logits = rng.permutation(logits)
        logits -= logits.max() + np.log(np.exp(logits - logits.max()).sum())
        rows.append(mx.array(logits.astype(np.float32)[None]))
    mx.eval(rows)
    return rows


def per_call(sample: Callable[[Any], Any], rows: list[Any], calls: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per evaluated call, cycling through ``rows``."""
    import mlx.core as mx

    for row in rows[:2]:
        mx.eval(sample(row))  # warm: mlx-lm's compiled kernels, allocations
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        mx.eval(sample(rows[i % len(rows)]))
    return (time.perf_counter() - wall) / calls * 1e3, (time.process_time() - cpu) / calls * 1e3


def mlx_lm_sampler(temperature: float, top_k: int = 0, top_p: float = 1.0) -> Callable[[Any], Any]:
    from mlx_lm.sample_utils import make_sampler

    return make_sampler(temp=temperature, top_p=top_p, top_k=top_k)


def bench_a(rounds: int) -> None:
    rows = lm_logprobs(8, 1.1)
    ours_wall: list[float] = []
    ours_cpu: list[float] = []
    ratios: list[float] = []
    for round_ in range(rounds):
        ours = Sampler(QWEN["temperature"], top_k=QWEN["top_k"], top_p=QWEN["top_p"], seed=round_)
        wall, cpu = per_call(ours, rows, 200)
        base_wall, base_cpu = per_call(mlx_lm_sampler(**QWEN), rows, 30)
        ours_wall.append(wall)
        ours_cpu.append(cpu)
        ratios.append(base_wall / wall)
        print(
            f"  (a) round {round_}: ours {wall:.3f} ms (CPU {cpu:.3f}), "
            f"mlx-lm {base_wall:.2f} ms (CPU {base_cpu:.2f}) per token",
            flush=True,
        )
    print(
        f"(a) sampler at Qwen3's defaults, vocab {VOCAB}: ours median {statistics.median(ours_wall):.3f} ms "
        f"(CPU {statistics.median(ours_cpu):.3f} ms) per token  (target ≤ 1 ms); mlx-lm ÷ ours: median of "
        f"paired ratios {statistics.median(ratios):.1f}×",
        flush=True,
    )
    others: list[tuple[str, Callable[[Any], Any], list[Any]]] = [
        ("top_k 20 only, T 0.6", Sampler(0.6, top_k=20, seed=0), rows),
        ("no top_k, top_p 0.95, T 0.6 (Zipf 1.1)", Sampler(0.6, top_p=0.95, seed=0), rows),
        ("no top_k, top_p 0.95, T 0.6 (Zipf 1.5)", Sampler(0.6, top_p=0.95, seed=0), lm_logprobs(8, 1.5)),
        ("mlx-lm no top_k, top_p 0.95, T 0.6", mlx_lm_sampler(0.6, top_p=0.95), rows),
        ("plain temperature 0.6", Sampler(0.6, seed=0), rows),
        ("mlx-lm plain temperature 0.6", mlx_lm_sampler(0.6), rows),
        ("greedy", Sampler(0.0), rows),
    ]
    for name, sample, inputs in others:
        wall, cpu = per_call(sample, inputs, 40)
        misses = ""
        if isinstance(sample, Sampler) and sample.top_p < 1 and not sample.top_k:  # the staged path
            misses = f", stage misses {sample.misses} of {40 + 2}"
        print(f"  (a) {name}: {wall:.3f} ms (CPU {cpu:.3f}) per token{misses}", flush=True)


def set_sampler(live: Any, backend: Any, make: MakeSampler) -> None:
    """The sampler the model's open batch makes for its next rows (set on the device thread)."""
    live.engine.device.activate(backend.info.id).result(300)  # resident, its batch open
    live.engine.device.run(lambda: setattr(backend.batch, "make_sampler", make)).result(60)


def bench_b(shape: str, n: int, rounds: int) -> None:
    from tinytitan.testing.server import live_server

    backend = MlxBackend(str(tiny_model_dir(shape, "bfloat16" if shape == "0.6b" else "float32")))
    ours_make: MakeSampler = make_sampler

    def mlx_lm_make(sampling: Sampling) -> Callable[[Any], Any]:  # what the backend did before
        import mlx.core as mx

        mx.random.seed(sampling.seed or 0)
        return mlx_lm_sampler(sampling.temperature or 0.0, sampling.top_k or 0, sampling.top_p or 1.0)

    print(f"  (b) {shape} model, defaults {backend.info.defaults}", flush=True)
    ratios: dict[str, list[float]] = {"ours": [], "mlx-lm": [], "top_k 1": []}
    cpu_ratios: dict[str, list[float]] = {"ours": [], "mlx-lm": [], "top_k 1": []}
    cpu_ms: dict[str, float] = {}
    try:
        backend.load()
        with live_server(backend) as live:
            for round_ in range(rounds + 1):  # round 0 warms every path up; they run back to back
                text = f"Round {round_}: " + words(24, round_)
                rates: dict[str, float] = {}
                runs: tuple[tuple[str, MakeSampler, dict[str, int] | None], ...] = (
                    ("greedy", ours_make, None),
                    ("ours", ours_make, {"seed": round_}),
                    ("mlx-lm", mlx_lm_make, {"seed": round_}),
                    ("top_k 1", ours_make, {"seed": round_, "top_k": 1}),  # our sampler, greedy's text
                )
                for name, make, sampling in runs:
                    set_sampler(live, backend, make)
                    backend.prompt_cache.clear()
                    cpu, tokens = time.process_time(), backend.tokens_generated
                    rates[name] = server_decode(live.url, backend, text, n, sampling)
                    cpu_ms[name] = (time.process_time() - cpu) / (backend.tokens_generated - tokens) * 1e3
                set_sampler(live, backend, ours_make)
                if round_:
                    for name in ratios:
                        ratios[name].append(rates[name] / rates["greedy"])
                        cpu_ratios[name].append(cpu_ms["greedy"] / cpu_ms[name])
                print(
                    f"  (b) round {round_}: greedy {rates['greedy']:.2f}, default sampling {rates['ours']:.2f} "
                    f"(mlx-lm's sampler {rates['mlx-lm']:.2f}; ours at top_k 1 {rates['top_k 1']:.2f}) tok/s; "
                    f"CPU per token (prefill included) {cpu_ms['greedy']:.1f} / {cpu_ms['ours']:.1f} / "
                    f"{cpu_ms['mlx-lm']:.1f} / {cpu_ms['top_k 1']:.1f} ms",
                    flush=True,
                )
    finally:
        backend.unload()
    print(
        f"(b) server decode at the model's default sampling ÷ greedy, {shape} shape: median of paired ratios "
        f"{statistics.median(ratios['ours']):.3f}  (target ≥ 0.95); with mlx-lm's sampler "
        f"{statistics.median(ratios['mlx-lm']):.3f}; tokens per CPU-second, same ratio: "
        f"{statistics.median(cpu_ratios['ours']):.3f} (mlx-lm's sampler {statistics.median(cpu_ratios['mlx-lm']):.3f})",
        flush=True,
    )
    print(
        f"(b) our sampler at top_k 1 (greedy's tokens, so the same text to stream) ÷ greedy, {shape}: "
        f"{statistics.median(ratios['top_k 1']):.3f}, per CPU-second {statistics.median(cpu_ratios['top_k 1']):.3f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds in (a) and (b)")
    parser.add_argument("--decode", type=int, default=32, help="tokens decoded per request in (b)")
    parser.add_argument("--shapes", default="0.6b,tiny", help="models for (b): 0.6b (the target), tiny")
    parser.add_argument("--only", default="a,b")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    print(f"OpenBLAS preloaded: {openblas_active()}", flush=True)
    if "a" in parts:
        bench_a(args.rounds)
    if "b" in parts:
        for shape in args.shapes.split(","):
            bench_b(shape, args.decode, args.rounds)


if __name__ == "__main__":
    main()
