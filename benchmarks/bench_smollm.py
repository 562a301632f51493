"""Decode speed of the embedded SmolLM2-135M-Instruct (from its GGUF file), printing ratios.

    python benchmarks/bench_smollm.py [--decode 64] [--rounds 4]

(a) decode tok/s through the server (streaming Chat Completions over a real loopback socket)
    ÷ direct ``mlx_lm.stream_generate`` with the same loaded model and prompt, back to back —
    target ≥ 0.97 (a 135M model decodes fast, so per-token overhead shows most here);
(b) the same decode rate ÷ the memory-bandwidth bound for its weights: read bandwidth measured with
    numpy in this run (best of several passes over a buffer larger than the caches) ÷ the bytes of
    weights one decode step reads.

Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``), fp32 as the server runs it.
Not part of the test run.
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

import numpy as np  # noqa: E402
from bench_mlx import direct_decode, server_decode  # noqa: E402

from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit  # noqa: E402
from tinytitan.testing.server import live_server  # noqa: E402

PROMPTS = [
    "Write a long story about a lighthouse keeper and a storm.",
    "Describe, in detail, how bread is baked, step by step.",
    "Tell me a long tale about a dragon who learns to paint.",
    "Explain at length how rivers shape the land over time.",
    "Write a long letter from a sailor to his family at home.",
]


def read_bandwidth(mib: int = 1024, passes: int = 5) -> float:
    """Best-of ``passes`` read bandwidth (bytes/s) of a numpy sum over a ``mib`` MiB buffer."""
    buf = np.ones(mib * 2**20 // 8, dtype=np.float64)
    best = 0.0
    for _ in range(passes):
        start = time.perf_counter()
        buf.sum()
        best = max(best, buf.nbytes / (time.perf_counter() - start))
    return best


def weight_bytes(backend: MlxBackend) -> int:
    """Bytes of parameters one decode step reads (a tied embedding counts once: it is the LM head)."""
    from mlx.utils import tree_flatten

    params = tree_flatten(backend._model.parameters())
    assert isinstance(params, list)  # (path, array) pairs
    return sum(v.nbytes for _, v in params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decode", type=int, default=64, help="tokens decoded per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="measured server/direct pairs")
    args = parser.parse_args()
    path = embedded_gguf_or_exit()
    print(f"OpenBLAS preloaded: {openblas_active()}; model {path.name}", flush=True)
    backend = MlxBackend(str(path))
    backend.load()
    rates: dict[str, list[float]] = {"server": [], "direct": []}
    ratios: list[float] = []
    with live_server(backend) as live:
        for round_ in range(args.rounds + 1):  # round 0 warms both paths up
            text = PROMPTS[round_ % len(PROMPTS)]
            backend.prompt_cache.clear()
            server_rate = server_decode(live.url, backend, text, args.decode)
            tokens = backend.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            direct_rate = direct_decode(backend, list(tokens), args.decode)
            print(f"  round {round_}: server {server_rate:.2f}, direct {direct_rate:.2f} tok/s", flush=True)
            if round_:
                rates["server"].append(server_rate)
                rates["direct"].append(direct_rate)
                ratios.append(server_rate / direct_rate)
    best_server, best_direct = max(rates["server"]), max(rates["direct"])
    print(
        f"(a) decode through the server ÷ direct stream_generate: best {best_server:.2f} ÷ {best_direct:.2f} tok/s "
        f"= {best_server / best_direct:.3f}, median of paired ratios {statistics.median(ratios):.3f}  "
        "(target ≥ 0.97)",
        flush=True,
    )
    bandwidth = read_bandwidth()
    weights = weight_bytes(backend)
    bound = bandwidth / weights
    print(
        f"(b) read bandwidth {bandwidth / 1e9:.1f} GB/s (numpy), weights {weights / 1e6:.0f} MB "
        f"({'fp32' if backend.loaded else '?'}) → bound {bound:.1f} tok/s; server {best_server:.2f} ÷ bound "
        f"= {best_server / bound:.3f}, direct {best_direct:.2f} ÷ bound = {best_direct / bound:.3f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
