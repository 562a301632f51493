"""Decode tok/s on the default device (an H200 under mlx's CUDA build): mlx-lm's generate_step vs
TinyTitan's MlxBatch (one row, and four rows at once), on random-weight Qwen3 models built by
tinytitan.testing.tiny_model. Also prefill tok/s of a long prompt, MlxBatch vs generate_step.

    python3 benchmarks/bench_gpu.py [--tokens 128] [--shapes 0.6b,tiny] [--dtype bfloat16] [--rounds 3]
                               [--prompt 64] [--prefill 2048]

Every measurement runs on this (claimed) device thread. Rates are wall-clock after each row's first
token (decode only); "median step" is rows ÷ the median MlxBatch step in which every row decoded
and nothing was prefilled (as benchmarks/bench_batch.py reads it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: tinytitan from the checkout


def prompt_of(length: int, salt: int) -> list[int]:
    """``length`` token ids, different for each salt (no prompt-cache hit between measurements)."""
    base = 1000 + (salt * 7919) % 120000
    return [base + (i * 31) % 997 for i in range(length)]


def decode_mlx_lm(model: Any, prompt: list[int], n: int) -> float:
    """tok/s of mlx-lm's generate_step (greedy), after its first token."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    steps = generate_step(mx.array(prompt), model, max_tokens=n + 1, prompt_cache=make_prompt_cache(model))
    next(steps)
    t = time.perf_counter()
    k = sum(1 for _ in steps)
    return k / (time.perf_counter() - t)


def decode_engine(model: Any, prompts: list[list[int]], n: int) -> tuple[float, float, int]:
    """(aggregate tok/s after every row has its first token, rows ÷ median full step, full steps)."""
    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import drive, row

    rows = len(prompts)
    batch = MlxBatch(model, PromptCache(4), "bench", [], rows)
    try:
        started: set[int] = set()
        t_all = 0.0
        after = 0
        for output in drive(batch, [row(p, n + 1) for p in prompts]):
            if output.error is not None:
                raise output.error
            if not output.tokens:
                continue
            if output.row.id not in started:
                started.add(output.row.id)
                if len(started) == rows:
                    t_all = time.perf_counter()
                continue
            if t_all:
                after += len(output.tokens)
        wall = after / (time.perf_counter() - t_all) if t_all and after else float("nan")
        full = [seconds for r, p, seconds in batch.steps if r == rows and p == 0]
        med = rows / statistics.median(full) if full else float("nan")
        return wall, med, len(full)
    finally:
        batch.close()


def prefill_mlx_lm(model: Any, prompt: list[int]) -> float:
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    t = time.perf_counter()
    steps = generate_step(mx.array(prompt), model, max_tokens=1, prompt_cache=make_prompt_cache(model))
    next(steps)
    return len(prompt) / (time.perf_counter() - t)


def prefill_engine(model: Any, prompt: list[int]) -> float:
    """Prompt tok/s of a one-row MlxBatch: time to its first token."""
    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import drive, row

    batch = MlxBatch(model, PromptCache(4), "bench", [], 1)
    try:
        t = time.perf_counter()
        rate = 0.0
        for output in drive(batch, [row(prompt, 2)]):
            if output.error is not None:
                raise output.error
            if output.tokens and not rate:
                rate = len(prompt) / (time.perf_counter() - t)
        return rate
    finally:
        batch.close()


def weight_bytes(model: Any) -> int:
    from mlx.utils import tree_flatten

    flat: Any = tree_flatten(model.parameters())
    return sum(int(v.nbytes) for _, v in flat)


def fmt(x: float) -> str:
    return f"{x:8.1f}"


def bench_shape(shape: str, dtype: str, args: argparse.Namespace, scratch: Path) -> None:
    import mlx.core as mx
    from mlx_lm import load

    from tinytitan.testing.tiny_model import build_model

    t = time.perf_counter()
    path = build_model(scratch / f"{shape}-{dtype}", shape=shape, dtype=dtype)
    built = time.perf_counter() - t
    model, _tokenizer = load(str(path))
    mx.eval(model.parameters())
    nbytes = weight_bytes(model)
    print(
        f"\n== shape {shape}, {dtype}: {nbytes / 1e9:.3f} GB of weights (built in {built:.1f} s); "
        f"{args.tokens} tokens after a {args.prompt}-token prompt, {args.rounds} rounds",
        flush=True,
    )

    n, salt = args.tokens, 0

    def next_prompt(length: int = args.prompt) -> list[int]:
        nonlocal salt
        salt += 1
        return prompt_of(length, salt)

    # warm: NVRTC compiles kernels on first use (one row and four rows give different shapes)
    t = time.perf_counter()
    decode_mlx_lm(model, next_prompt(), 8)
    decode_engine(model, [next_prompt()], 8)
    decode_engine(model, [next_prompt() for _ in range(4)], 8)
    print(f"  warm-up {time.perf_counter() - t:.1f} s", flush=True)

    mlx_lm_rates, one_rates, four_rates, four_steps, one_steps = [], [], [], [], []
    for r in range(args.rounds):
        a = decode_mlx_lm(model, next_prompt(), n)
        one, one_med, _ = decode_engine(model, [next_prompt()], n)
        four, four_med, full = decode_engine(model, [next_prompt() for _ in range(4)], n)
        mlx_lm_rates.append(a)
        one_rates.append(one)
        four_rates.append(four)
        one_steps.append(one_med)
        four_steps.append(four_med)
        print(
            f"  round {r + 1}: generate_step {fmt(a)} tok/s | MlxBatch 1 row {fmt(one)} tok/s "
            f"(median step {one_med:.1f}) | 4 rows {fmt(four)} tok/s aggregate "
            f"(median full step {four_med:.1f}, {full} full steps)",
            flush=True,
        )
    a, one, four = (statistics.median(x) for x in (mlx_lm_rates, one_rates, four_rates))
    print(
        f"  median: generate_step {a:.1f} tok/s, MlxBatch 1 row {one:.1f}, 4 rows {four:.1f} aggregate "
        f"({four / 4:.1f} per row)"
    )
    print(f"  ratio engine (1 row) ÷ mlx-lm = {one / a:.3f}")
    print(
        f"  ratio 4 rows aggregate ÷ 1 row = {four / one:.3f}  (by median steps: "
        f"{statistics.median(four_steps) / statistics.median(one_steps):.3f})"
    )
    print(
        f"  weights read per step at generate_step's rate: {nbytes * a / 1e9:.0f} GB/s "
        f"(H200 HBM ≈ 4800 GB/s peak: decode here is bound by launches/latency if this is far below)",
        flush=True,
    )

    if args.prefill:
        try:
            prefill_engine(model, next_prompt(args.prefill))  # warm the chunk shapes
            prefill_mlx_lm(model, next_prompt(args.prefill))
            eng = [prefill_engine(model, next_prompt(args.prefill)) for _ in range(2)]
            ref = [prefill_mlx_lm(model, next_prompt(args.prefill)) for _ in range(2)]
            e, p = max(eng), max(ref)
            print(
                f"  prefill {args.prefill} tokens: MlxBatch {e:.0f} tok/s, generate_step {p:.0f} tok/s "
                f"(engine ÷ mlx-lm {e / p:.3f})",
                flush=True,
            )
        except Exception:  # report, keep going
            traceback.print_exc()
    del model
    mx.clear_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128, help="decoded tokens per measurement")
    parser.add_argument("--shapes", default="0.6b,tiny", help="tiny_model shapes, comma-separated")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens before decoding")
    parser.add_argument("--prefill", type=int, default=2048, help="prefill prompt tokens (0: skip)")
    args = parser.parse_args()

    import mlx.core as mx

    from tinytitan.engine.device import thread as device_thread

    failed = 0
    with tempfile.TemporaryDirectory(prefix="tinytitan-gpu-decode-") as scratch, device_thread.claimed():
        cuda = getattr(getattr(mx, "cuda", None), "is_available", lambda: False)()
        print(
            f"mlx {getattr(mx, '__version__', '?')}, default device {mx.default_device()}, cuda available {cuda}",
            flush=True,
        )
        for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]:
            try:
                bench_shape(shape, args.dtype, args, Path(scratch))
            except Exception:
                failed += 1
                print(f"shape {shape} failed:", flush=True)
                traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # MLX ran on this thread: finalizing can abort on its thread-local compile cache
