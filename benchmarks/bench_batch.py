"""Continuous batching: throughput by batch size, and how often batch company changes an output.

    python benchmarks/bench_batch.py [--only scale,flips] [--rows 1,2,4,8] [--runs 40] [--blas openblas|blis]

- **scale** (0.6B shape, fp32): N rows decoding together through ``MlxBatch`` (greedy, short
  different prompts, all admitted at once); aggregate decode tok/s in the steady state (the median
  step with every row decoding and nothing prefilled) ÷ one row's. This is what
  ``--max-concurrent``'s default is chosen by.
- **flips** (tiny model): a request alone, then the same request decoded beside three others; the
  share of requests whose output differs and where it first differs. Rows never share random
  state (each sampler owns its key), so a difference can only come from summation order: a batch of
  rows is one matrix product, one row alone another, and a BLAS may add in a different order —
  which flips a near-tie now and then (each request's ``Sampler`` owns its random stream).
  Run for greedy and for sampled (seeded) requests.

Not part of the test run; times are noisy on this shared box — read the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_decode import preload


def make_runner(model: Any, rows: int) -> Any:
    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache

    return MlxBatch(model, PromptCache(0), "bench", [], rows)


def run_rows(runner: Any, prompts: list[list[int]], samplings: list[Any], n: int) -> list[list[int]]:
    """Add every prompt at once and step the batch until all end; the tokens each row produced."""
    from tinytitan.testing.batches import collect, row

    return collect(runner, [row(p, n, s) for p, s in zip(prompts, samplings, strict=True)])


def part_scale(model: Any, counts: list[int], n: int) -> None:
    """Steady-state decode: steps where every row decodes and nothing is prefilled."""
    import statistics

    from tinytitan.engine.request import Sampling

    base = None
    for rows in counts:
        runner = make_runner(model, rows)
        prompts = [list(range(1000 + 97 * i, 1032 + 97 * i)) for i in range(rows)]
        run_rows(runner, prompts[:1], [Sampling(temperature=0.0)], 2)  # warm
        runner.steps.clear()
        run_rows(runner, prompts, [Sampling(temperature=0.0)] * rows, n)
        full = [seconds for r, p, seconds in runner.steps if r == rows and p == 0]
        runner.close()
        step = statistics.median(full)
        aggregate = rows / step
        base = base or aggregate
        print(
            f"  {rows} rows: median step {step * 1e3:.0f} ms over {len(full)} full steps → {aggregate:.2f} tok/s "
            f"aggregate = {aggregate / base:.2f}× one row",
            flush=True,
        )


def part_flips(model: Any, runs: int, n: int) -> None:
    from tinytitan.engine.request import Sampling

    for label, sampling in (
        ("greedy", lambda i: Sampling(temperature=0.0)),
        ("sampled", lambda i: Sampling(temperature=0.6, top_p=0.95, top_k=20, seed=i)),
    ):
        alone_runner, batch_runner = make_runner(model, 1), make_runner(model, 4)
        differ, first = 0, []
        for i in range(runs):
            prompt = list(range(2000 + 31 * i, 2040 + 31 * i))
            company = [list(range(5000 + 53 * (i + j), 5030 + 53 * (i + j) + 7 * j)) for j in range(1, 4)]
            (alone,) = run_rows(alone_runner, [prompt], [sampling(i)], n)
            together = run_rows(
                batch_runner, [prompt, *company], [sampling(i), *(sampling(1000 + i) for _ in company)], n
            )
            if together[0] != alone:
                differ += 1
                first.append(
                    next((k for k, (a, b) in enumerate(zip(alone, together[0], strict=False)) if a != b), len(alone))
                )
        alone_runner.close()
        batch_runner.close()
        where = f"; first differing token at {sorted(first)}" if first else ""
        print(f"flips ({label}): {differ} of {runs} requests ({differ / runs:.1%}) differ beside 3 others{where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blas", default="openblas")
    parser.add_argument("--only", default="scale,flips")
    parser.add_argument("--rows", default="1,2,4,8")
    parser.add_argument("--decode", type=int, default=24, help="tokens per row in scale")
    parser.add_argument("--runs", type=int, default=40, help="requests compared in flips")
    parser.add_argument("--flip-tokens", type=int, default=32)
    args = parser.parse_args()
    lib = preload(args.blas)
    import mlx.core as mx
    from mlx_lm.utils import load_model

    from tinytitan.testing.tiny_model import tiny_model_dir

    print(f"BLAS {lib}", flush=True)
    parts = set(args.only.split(","))
    if "scale" in parts:
        model, _ = load_model(tiny_model_dir("0.6b", "float32"), lazy=True)
        mx.eval(model.parameters())
        part_scale(model, [int(x) for x in args.rows.split(",")], args.decode)
        del model
    if "flips" in parts:
        model, _ = load_model(tiny_model_dir(), lazy=True)
        mx.eval(model.parameters())
        part_flips(model, args.runs, args.flip_tokens)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # MLX ran on runner threads: finalizing would abort on its thread-local compile cache
