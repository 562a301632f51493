"""BLIS's kernel sets on this CPU, end to end on the embedded SmolLM2: prints ratios to ``generic``.

    python benchmarks/bench_blis.py [--rounds 2] [--sets generic,zen3,haswell]

BLIS reads ``BLIS_ARCH_TYPE`` once per process, so each kernel set runs in a child process of its
own with Debian's BLIS preloaded (2 threads), the sets alternating round by round. Each child loads
the embedded SmolLM2-135M-Instruct (fp32 on the CPU, prompt cache off) through the Engine and
measures, greedy:

- prefill: tok/s of a ~2,000-token prompt (one token out);
- decode x1: decode tok/s of one stream (96 tokens);
- decode x4: aggregate decode tok/s of four concurrent streams (96 tokens each);
- matmul MxK·KxN: one fp32 product of M rows by the LM head (49,152 × 576) and by an MLP matrix.

``generic`` is what BLIS 0.9.0 (Debian 12) picks on a CPU it does not know (Zen 4, Zen 5);
``tinytitan.blis`` picks ``zen3`` (AMD) or ``haswell`` there instead. Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def kernel_sets(lib: str) -> dict[str, int]:
    """The kernel sets this BLIS build has names for, with their ids (queried in a forked child)."""
    from tinytitan import blis

    def names() -> str:
        import ctypes

        lib_ = ctypes.CDLL(lib)
        lib_.bli_init()
        lib_.bli_arch_string.restype = ctypes.c_char_p
        ids = range(64)
        found = {}
        for i in ids:
            name = lib_.bli_arch_string(i).decode()
            found[name] = i
            if name == "generic":  # the last id
                break
        return json.dumps(found)

    answer = blis._forked(names)
    return json.loads(answer) if answer else {}


def child() -> None:
    from tinytitan import blis
    from tinytitan.cpu_blas import blas_state, find_blis

    blis.init(str(find_blis()))  # BLIS_ARCH_TYPE is set: before threadpoolctl asks it anything
    from bench_mlx import request, stream

    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit
    from tinytitan.engine.service import Engine

    path = embedded_gguf_or_exit()
    backend = MlxBackend(str(path), max_concurrent=4, prompt_cache_entries=0)
    engine = Engine(backend)
    out: dict[str, Any] = {"blas": blas_state().describe()}
    try:
        backend.load()
        source = (ROOT / "tinytitan/engine/job.py").read_text()
        prompt = "Summarise this file:\n\n" + source[:7000]

        async def measure() -> None:
            await stream(engine, request(engine, [("user", "warm up")], 4))
            r = await stream(engine, request(engine, [("user", prompt)], 1))
            out["prefill"] = r["usage"].prompt_tokens / (r["first"] - r["start"])
            story = "Write a long story about a lighthouse keeper and a storm."
            r = await stream(engine, request(engine, [("user", story)], 96))
            out["decode x1"] = (r["usage"].completion_tokens - 1) / (r["end"] - r["first"])
            asks = [request(engine, [("user", f"{story} Call the keeper {name}.")], 96) for name in "ABCD"]
            runs = await asyncio.gather(*(stream(engine, ask) for ask in asks))
            made = sum(x["usage"].completion_tokens for x in runs)
            out["decode x4"] = made / (max(x["end"] for x in runs) - min(x["first"] for x in runs))

        from tinytitan.testing.loop import run

        run(measure())

        def matmuls() -> dict[str, float]:
            import mlx.core as mx

            times = {}
            for n, k in ((49152, 576), (1536, 576)):
                w = mx.random.normal((n, k))
                for m in (1, 2, 4, 9, 256):
                    x = mx.random.normal((m, k))
                    mx.eval(w, x, x @ w.T)
                    began = time.perf_counter()
                    for _ in range(5):
                        mx.eval(x @ w.T)
                    times[f"matmul {m}x{k}·{k}x{n} (ms)"] = (time.perf_counter() - began) / 5 * 1000
            return times

        out.update(engine.device.run(matmuls).result())
    finally:
        engine.shutdown()
    print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sets", default="generic,zen3,haswell", help="kernel sets to compare, the first the baseline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child()
        return
    from tinytitan.cpu_blas import find_blis, preload_env

    lib = find_blis()
    if lib is None:
        sys.exit("Debian's BLIS is not installed: apt-get install libblis4-pthread")
    known = kernel_sets(lib)
    chosen = [name for name in args.sets.split(",") if name in known]
    print(f"{lib}; kernel sets {', '.join(chosen)} (ids {', '.join(str(known[n]) for n in chosen)})", flush=True)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
    for i in range(args.rounds):
        for name in chosen if i % 2 == 0 else chosen[::-1]:
            env = preload_env(
                lib, {**os.environ, "BLIS_ARCH_TYPE": str(known[name]), "_TINYTITAN_OPENBLAS_REEXEC": "1"}
            )
            env["BLIS_NUM_THREADS"] = env.get("BLIS_NUM_THREADS", "2")
            done = subprocess.run(
                [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                print(f"  {name}: failed\n{done.stderr[-2000:]}", flush=True)
                continue
            line = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"  round {i + 1} {name}: {line.pop('blas')}: " + ", ".join(f"{k} {v:.1f}" for k, v in line.items()),
                flush=True,
            )
            results[name].append(line)
    base = chosen[0]
    for name in chosen[1:]:
        if not results[name] or not results[base]:
            continue
        ratios = []
        for key in results[base][0]:
            mine = statistics.median(r[key] for r in results[name])
            theirs = statistics.median(r[key] for r in results[base])
            better = theirs / mine if "(ms)" in key else mine / theirs  # > 1: faster than the baseline
            ratios.append(f"{key.removesuffix(' (ms)')} ×{better:.2f}")
        print(f"{name} vs {base} (speed, > 1 faster): " + "; ".join(ratios), flush=True)


if __name__ == "__main__":
    main()
