"""A freeform call held to its grammar: decode cost on the Qwen3-0.6B-shape model (random weights), issue 38.

    python benchmarks/bench_freeform.py [--decode 48] [--rounds 3] [--shape 0.6b] [--grammar codex_apply_patch]

Decode tok/s of a forced call of Codex's ``apply_patch`` custom tool, its input held to Codex's own Lark
grammar (the call grammar in Qwen3's syntax: the input a JSON string whose pattern is the grammar's
regular expression) ÷ the same request decoded free (``tool_choice`` auto: no mask), measured back to
back in this process, rounds paired (target ≥ 0.9); and the per-token mask time (llguidance bitmask →
numpy bool → ``mx.array``), mean and p95 in ms. Random weights write long lines, so both decode to the
cap. Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``). Not part of the test run;
on a machine shared with other work the figures are noise — compare the paired ratios, not the rates.
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

from tinytitan.engine.events import Finished  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import (  # noqa: E402
    ChatRequest,
    Freeform,
    Message,
    ReasoningControls,
    Sampling,
    Tool,
    ToolChoice,
)
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.freeform import grammar  # noqa: E402
from tinytitan.testing.loop import run  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402


def request(engine: Engine, text: str, n: int, definition: str, *, held: bool) -> ChatRequest:
    tool = Tool("apply_patch", "Edit files.", type="custom", format=Freeform("grammar", "lark", definition))
    return ChatRequest(
        model=engine.info.id,
        messages=(Message("user", text),),
        tools=(tool,),
        tool_choice=ToolChoice("function", "apply_patch") if held else ToolChoice("auto"),
        max_tokens=n,
        sampling=Sampling(temperature=1.0, seed=7),
        reasoning=ReasoningControls(enable_thinking=False),
        stream=True,
    )


async def decode_rate(engine: Engine, stamps: list[float], req: ChatRequest) -> tuple[float, int]:
    """Tokens per second from the first token to the last (when the device step that made each was
    counted: a held call's events come only when the call is whole), and how many were generated."""
    start = len(stamps)
    job = await engine.prepare(req)
    usage = None
    async for event in job.events():
        if isinstance(event, Finished):
            usage = event.usage
    assert usage is not None
    mine = stamps[start:]
    return (len(mine) - 1) / (mine[-1] - mine[0]), usage.completion_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--decode", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", default="0.6b")
    ap.add_argument("--grammar", default="codex_apply_patch", help="a grammar of tinytitan/testing/grammars")
    args = ap.parse_args()
    print(f"OpenBLAS preloaded: {openblas_active()}", flush=True)
    definition = grammar(args.grammar)
    backend = MlxBackend(str(tiny_model_dir(shape=args.shape)), drafts=False)  # drafts would speed the free run
    stamps: list[float] = []  # when each generated token was counted (on the device thread)
    counted = backend._count

    def timed(n: int) -> None:
        stamps.extend([time.perf_counter()] * n)
        counted(n)

    backend._count = timed  # type: ignore[method-assign]  # before the batch opens: it keeps this one
    engine = Engine(backend)
    backend.load()
    _ = backend.lltokenizer  # built once per backend; not part of the decode figures
    ratios: list[float] = []
    free_rates: list[float] = []
    held_rates: list[float] = []
    mask_ms: list[float] = []
    for round_ in range(args.rounds + 1):  # round 0 warms both paths up
        text = f"Round {round_}: fix the bug in app.py with a patch."
        backend.prompt_cache.clear()
        free, n_free = run(decode_rate(engine, stamps, request(engine, text, args.decode, definition, held=False)))
        backend.prompt_cache.clear()
        held, n_held = run(decode_rate(engine, stamps, request(engine, text, args.decode, definition, held=True)))
        mask = backend.last_mask
        assert mask is not None
        print(
            f"  round {round_}: free {free:.2f} tok/s ({n_free} tokens), held to the grammar {held:.2f} tok/s "
            f"({n_held} tokens), mask mean {1000 * statistics.mean(mask.mask_seconds):.3f} ms",
            flush=True,
        )
        if round_:
            free_rates.append(free)
            held_rates.append(held)
            ratios.append(held / free)
            mask_ms.extend(1000 * s for s in mask.mask_seconds)
    engine.shutdown()
    mask_ms.sort()
    p95 = mask_ms[min(len(mask_ms) - 1, int(0.95 * len(mask_ms)))]
    print(
        f"constrained ÷ unconstrained decode ({args.grammar}): median of paired ratios "
        f"{statistics.median(ratios):.3f}, best {max(held_rates):.2f} ÷ {max(free_rates):.2f} tok/s = "
        f"{max(held_rates) / max(free_rates):.3f} (target ≥ 0.9)"
    )
    print(f"mask time per token: mean {statistics.mean(mask_ms):.3f} ms, p95 {p95:.3f} ms over {len(mask_ms)} tokens")


if __name__ == "__main__":
    main()
