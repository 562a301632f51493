"""Grammar-constrained decoding cost on the Qwen3-0.6B-shape model (random weights), issue #6.

    python benchmarks/bench_grammar.py [--decode 48] [--rounds 3] [--shape 0.6b]

Decode tok/s with a ``json_object`` grammar masking every step ÷ the same request unconstrained
(target ≥ 0.9), through the Engine, rounds paired back to back; and the per-token mask time
(llguidance bitmask → numpy bool → ``mx.array``), mean and p95 in ms. Random weights write long
strings, so a constrained run decodes to its cap like the free one. Runs under the OpenBLAS preload
(re-exec via ``tinytitan.cpu_blas``). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas, openblas_active

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from tinytitan.engine.events import Finished  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import ChatRequest, FormatRequest, Message, ReasoningControls, Sampling  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.loop import run  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402


def request(engine: Engine, text: str, n: int, fmt: dict[str, Any] | None) -> ChatRequest:
    return ChatRequest(
        model=engine.info.id,
        messages=(Message("user", text),),
        max_tokens=n,
        sampling=Sampling(temperature=1.0, seed=7),
        reasoning=ReasoningControls(enable_thinking=False),
        output_format=FormatRequest("json_object", "response_format", "response_format") if fmt else None,
        stream=True,
    )


async def decode_rate(engine: Engine, req: ChatRequest) -> tuple[float, int]:
    """Tokens per second after the first token, and how many were generated."""
    backend = engine.backend
    assert isinstance(backend, MlxBackend)
    job = await engine.prepare(req)
    first: float | None = None
    first_tokens = 0
    usage = None
    async for event in job.events():
        if first is None:
            first, first_tokens = time.perf_counter(), backend.tokens_generated
        if isinstance(event, Finished):
            usage = event.usage
    end = time.perf_counter()
    assert usage is not None and first is not None
    after_first = backend.tokens_generated - first_tokens
    return after_first / (end - first), usage.completion_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--decode", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", default="0.6b")
    args = ap.parse_args()
    print(f"OpenBLAS preloaded: {openblas_active()}", flush=True)
    backend = MlxBackend(str(tiny_model_dir(shape=args.shape)))
    engine = Engine(backend)
    backend.load()
    _ = backend.lltokenizer  # built once per backend; not part of the decode figures
    ratios: list[float] = []
    free_rates: list[float] = []
    bound_rates: list[float] = []
    mask_ms: list[float] = []
    for round_ in range(args.rounds + 1):  # round 0 warms both paths up
        text = f"Round {round_}: describe a thing as JSON."
        backend.prompt_cache.clear()
        free, n_free = run(decode_rate(engine, request(engine, text, args.decode, None)))
        backend.prompt_cache.clear()
        bound, n_bound = run(decode_rate(engine, request(engine, text, args.decode, {"type": "json_object"})))
        mask = backend.last_mask
        assert mask is not None
        print(
            f"  round {round_}: free {free:.2f} tok/s ({n_free} tokens), constrained {bound:.2f} tok/s "
            f"({n_bound} tokens), mask mean {1000 * statistics.mean(mask.mask_seconds):.3f} ms",
            flush=True,
        )
        if round_:
            free_rates.append(free)
            bound_rates.append(bound)
            ratios.append(bound / free)
            mask_ms.extend(1000 * s for s in mask.mask_seconds)
    mask_ms.sort()
    p95 = mask_ms[min(len(mask_ms) - 1, int(0.95 * len(mask_ms)))]
    print(
        f"constrained ÷ unconstrained decode: median of paired ratios {statistics.median(ratios):.3f}, "
        f"best {max(bound_rates):.2f} ÷ {max(free_rates):.2f} tok/s = {max(bound_rates) / max(free_rates):.3f} "
        f"(target ≥ 0.9)"
    )
    print(f"mask time per token: mean {statistics.mean(mask_ms):.3f} ms, p95 {p95:.3f} ms over {len(mask_ms)} tokens")


if __name__ == "__main__":
    main()
