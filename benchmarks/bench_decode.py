"""Decode against the memory-bandwidth bound (0.6B shape, fp32), and what moves it. Prints ratios.

    python benchmarks/bench_decode.py [--blas openblas|blis|LIB.so] [--decode 16]
                                      [--only bw,decode,compile,attention,prefill]

- **bw**: read bandwidth measured here with numpy (1 GiB summed by one thread, and by two), the
  bytes a decode step reads (every weight once — the tied embedding as the LM head — plus the KV
  cache), and so the bound in tok/s.
- **decode**: tok/s of ``mlx_lm.generate_step`` (pipelined with ``async_eval``: the next step is
  queued before the current token is read back) and of our ``MlxBatch`` with one row, as a
  fraction of the bound. Also the time one LM-head matmul takes vs numpy's on the same matrix (the
  profile says where a step's time goes).
- **compile**: the same decode with every layer's MLP and norms under ``mx.compile``.
- **attention**: one layer's attention over a prompt chunk (256 and 2048 queries, 3,137 keys, the
  0.6B shape's 16 query / 8 key heads), mlx's ``mx.fast.scaled_dot_product_attention`` vs ours
  (``engine/models/mlx/cpu_attention.py``), and mlx's ``exp`` vs NumPy's on the same scores.
- **prefill**: prefill tok/s of a ``--prefill-prompt``-token prompt: our ``MlxBatch`` as it runs
  now (NumPy attention, 2048-token chunks when alone), as it ran before (mlx attention, 256-token
  chunks), and mlx-lm's ``generate_step`` in 2048-token chunks (what ``mlx_lm.server`` does).

The BLAS is preloaded by re-executing this script (``--blas``: Debian's OpenBLAS, Debian's BLIS
``libblis4-pthread``, or a library path). Times on this shared box are noisy: compare the ratios
printed by one run. Not part of the test run.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BLAS = {
    "openblas": "/usr/lib/*/openblas-pthread/libopenblas.so.0",
    "blis": "/usr/lib/*/blis-pthread/libblis.so.4",
}
_REEXEC = "_TINYTITAN_BENCH_BLAS"


def preload(choice: str) -> str:
    """Re-exec once with the chosen BLAS preloaded; returns its path."""
    lib = choice if os.path.exists(choice) else next(iter(sorted(glob.glob(BLAS.get(choice, "")))), "")
    if not lib:
        sys.exit(f"no library for --blas {choice}")
    if os.environ.get(_REEXEC) != lib:
        from tinytitan.cpu_blas import preload_env

        env = preload_env(lib, {**os.environ, "LD_PRELOAD": "", _REEXEC: lib})
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    return lib


def bandwidth() -> tuple[float, float]:
    """Best read bandwidth (bytes/s) of numpy summing 1 GiB with one thread, and with two."""
    import numpy as np

    a = np.ones(2**28, dtype=np.float32)
    a.sum()
    one = two = 0.0
    halves = [a[: a.size // 2], a[a.size // 2 :]]
    for _ in range(4):
        t = time.perf_counter()
        a.sum()
        one = max(one, a.nbytes / (time.perf_counter() - t))
        threads = [threading.Thread(target=h.sum) for h in halves]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        two = max(two, a.nbytes / (time.perf_counter() - t))
    return one, two


def step_bytes(model: Any, context: int) -> int:
    """Bytes one decode step reads: every weight once (a tied embedding as the LM head) + the KV cache."""
    from mlx.utils import tree_flatten

    params = dict(tree_flatten(model.parameters()))
    total = sum(v.nbytes for v in params.values())
    args = model.args
    tied = getattr(args, "tie_word_embeddings", True)
    if not tied:  # the input embedding is only gathered: one row
        embed = params["model.embed_tokens.weight"]
        total -= embed.nbytes - embed.nbytes // embed.shape[0]
    head_dim = getattr(args, "head_dim", None) or args.hidden_size // args.num_attention_heads
    kv = 2 * args.num_hidden_layers * args.num_key_value_heads * head_dim * 4 * context
    return total + kv


def decode_direct(model: Any, prompt: list[int], n: int) -> float:
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    steps = generate_step(mx.array(prompt), model, max_tokens=n + 1, prompt_cache=make_prompt_cache(model))
    next(steps)
    t = time.perf_counter()
    k = sum(1 for _ in steps)
    return k / (time.perf_counter() - t)


def decode_runner(model: Any, prompt: list[int], n: int) -> float:
    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import drive, row

    batch = MlxBatch(model, PromptCache(0), "bench", [], 1)
    t, k = 0.0, 0
    for output in drive(batch, [row(prompt, n + 1)]):
        if output.tokens and not t:
            t = time.perf_counter()  # after the first token: decode only
        elif output.tokens:
            k += len(output.tokens)
    rate = k / (time.perf_counter() - t)
    batch.close()
    return rate


def head_matmul(model: Any) -> tuple[float, float]:
    """Seconds of one (1 × hidden) @ LM-headᵀ matmul in mlx, and in numpy on the same matrix."""
    import mlx.core as mx
    import numpy as np

    w = model.model.embed_tokens.weight if model.args.tie_word_embeddings else model.lm_head.weight
    x = mx.ones((1, w.shape[1]), dtype=w.dtype)
    wn, xn = np.array(w), np.ones((1, w.shape[1]), dtype=np.float32)

    return best_of(lambda: mx.eval(x @ w.T), 5), best_of(lambda: xn @ wn.T, 5)


def compile_layers(model: Any) -> None:
    """Put every layer's MLP and norms under ``mx.compile`` (pure functions of their inputs)."""
    import mlx.core as mx
    import mlx.nn as nn

    class Compiled(nn.Module):
        def __init__(self, module: Any) -> None:
            super().__init__()
            self._fn = mx.compile(lambda x: module(x))  # the weights are constants of the graph

        def __call__(self, x: Any) -> Any:
            return self._fn(x)

    for layer in model.model.layers:
        for name in ("mlp", "input_layernorm", "post_attention_layernorm"):
            setattr(layer, name, Compiled(getattr(layer, name)))


def attention_times(length: int, keys: int = 3137) -> tuple[float, float]:
    """Seconds of one layer's attention, mlx's and ours, for ``length`` queries against ``keys``."""
    import mlx.core as mx

    from tinytitan.engine.models.mlx import cpu_attention

    cpu_attention.uninstall()
    q = mx.random.normal((1, 16, length, 128))
    k, v = mx.random.normal((1, 8, keys, 128)) * 0.1, mx.random.normal((1, 8, keys, 128))
    mask = "causal"
    theirs = best_of(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=0.088, mask=mask)))
    ours = best_of(lambda: mx.eval(cpu_attention.attention(q, k, v, scale=0.088, mask=mask)))
    return theirs, ours


def exp_times() -> tuple[float, float]:
    import mlx.core as mx
    import numpy as np

    scores = mx.random.normal((8, 512, 3137))
    mx.eval(scores)
    copy = np.array(scores)
    return best_of(lambda: mx.eval(mx.exp(scores))), best_of(lambda: np.exp(copy))


def best_of(fn: Any, runs: int = 3) -> float:
    fn()
    out = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def prefill_runner(model: Any, prompt: list[int], alone: int, numpy_attention: bool) -> float:
    """Prefill tok/s of ``prompt`` through a one-row ``MlxBatch`` (time to its first token)."""
    from tinytitan.engine.device.mlx_batch import MlxBatch
    from tinytitan.engine.models.mlx import cpu_attention
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import drive, row

    (cpu_attention.install if numpy_attention else cpu_attention.uninstall)()
    batch = MlxBatch(model, PromptCache(0), "bench", [], 4, prefill_alone=alone)
    t = time.perf_counter()
    rate = 0.0
    for output in drive(batch, [row(prompt, 2)]):
        if output.tokens and not rate:
            rate = len(prompt) / (time.perf_counter() - t)
    batch.close()
    return rate


def prefill_direct(model: Any, prompt: list[int], chunk: int) -> float:
    """Prefill tok/s of mlx-lm's ``generate_step`` (mlx attention) in ``chunk``-token steps."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    from tinytitan.engine.models.mlx import cpu_attention

    cpu_attention.uninstall()
    t = time.perf_counter()
    steps = generate_step(
        mx.array(prompt), model, max_tokens=1, prompt_cache=make_prompt_cache(model), prefill_step_size=chunk
    )
    next(steps)
    return len(prompt) / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blas", default="openblas", help="openblas, blis or a library path")
    parser.add_argument("--model", type=Path, help="model directory (default: the 0.6B-shape fp32 build)")
    parser.add_argument("--decode", type=int, default=16, help="tokens decoded per measurement")
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens before decoding")
    parser.add_argument("--only", default="bw,decode,compile,attention,prefill")
    parser.add_argument("--prefill-prompt", type=int, default=3137, help="prompt tokens in prefill")
    args = parser.parse_args()
    lib = preload(args.blas)
    parts = set(args.only.split(","))

    import mlx.core as mx
    from mlx_lm.utils import load_model

    from tinytitan.testing.tiny_model import tiny_model_dir

    path = args.model or tiny_model_dir("0.6b", "float32")
    print(f"BLAS {lib} (BLIS_NUM_THREADS={os.environ.get('BLIS_NUM_THREADS')}); model {path}", flush=True)
    model, _ = load_model(Path(path), lazy=True)
    mx.eval(model.parameters())
    prompt = list(range(1000, 1000 + args.prompt))
    nbytes = step_bytes(model, args.prompt + args.decode // 2)
    before = max(bandwidth())
    print(f"bw: numpy read {before / 1e9:.1f} GB/s; a decode step reads {nbytes / 1e9:.3f} GB", flush=True)
    if "decode" in parts or "compile" in parts:
        direct = decode_direct(model, prompt, args.decode)
        ours = decode_runner(model, prompt, args.decode)
        after = max(bandwidth())  # the box is shared: bandwidth on both sides of the decode, averaged
        bound = (before + after) / 2 / nbytes
        mlx_head, np_head = head_matmul(model)
        print(
            f"  bandwidth {before / 1e9:.1f} GB/s before, {after / 1e9:.1f} after → bound {bound:.2f} tok/s; "
            f"generate_step {direct:.2f} tok/s, MlxBatch (1 row) {ours:.2f} tok/s",
            flush=True,
        )
        print(f"decode ÷ bandwidth bound: generate_step {direct / bound:.3f}, ours {ours / bound:.3f}  (target ≥ 0.5)")
        print(f"decode ours ÷ generate_step = {ours / direct:.3f}")
        print(
            f"LM-head matmul: mlx {mlx_head * 1e3:.1f} ms vs numpy {np_head * 1e3:.1f} ms on the same matrix "
            f"(mlx ÷ numpy time {mlx_head / np_head:.2f})"
        )
    if "compile" in parts:
        compile_layers(model)
        compiled = decode_direct(model, prompt, args.decode)
        again = decode_direct(model, prompt, args.decode)
        print(f"compile: mx.compile'd MLPs and norms ÷ plain = {max(compiled, again) / direct:.3f}")
    if "attention" in parts:
        for length in (256, 2048):
            theirs, ours = attention_times(length)
            print(
                f"attention, {length} queries × 3137 keys, one layer: mlx {theirs * 1e3:.0f} ms, "
                f"ours {ours * 1e3:.0f} ms (ours ÷ mlx {ours / theirs:.2f})"
            )
        mlx_exp, np_exp = exp_times()
        print(f"exp of 12.9M floats: mlx {mlx_exp * 1e3:.0f} ms, numpy {np_exp * 1e3:.0f} ms", flush=True)
    if "prefill" in parts:
        from tinytitan.engine.device.mlx_batch import PREFILL_ALONE, PREFILL_STEP

        long_prompt = list(range(2000, 2000 + args.prefill_prompt))
        now = prefill_runner(model, long_prompt, PREFILL_ALONE, True)
        before = prefill_runner(model, long_prompt, PREFILL_STEP, False)
        peer = prefill_direct(model, long_prompt, 2048)
        print(
            f"prefill tok/s of {len(long_prompt)} tokens: MlxBatch now {now:.1f}, before {before:.1f}, "
            f"generate_step (2048) {peer:.1f}"
        )
        print(f"prefill now ÷ before = {now / before:.2f}; now ÷ generate_step = {now / peer:.2f}")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # MLX ran on runner threads: finalizing would abort on its thread-local compile cache
