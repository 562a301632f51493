"""Speculative decoding with prompt-lookup drafts on the embedded SmolLM2-135M-Instruct, printing ratios.

    python benchmarks/bench_speculative.py [--rounds 3] [--only rewrite,patch,chat] [--sampling default]
    python benchmarks/bench_speculative.py --passes 2000     # what a verify pass costs
    python benchmarks/bench_speculative.py --draft-model DIR  # … with a draft model's drafts too
    python benchmarks/bench_speculative.py --draft-layers 8   # … a draft of the model's first 8 layers
    python benchmarks/bench_speculative.py --streams 2        # the same request from 2 clients at once
    python benchmarks/bench_speculative.py --mix patch,chat   # a patch and a chat at once

Greedy (``--sampling default``: the model's own sampling, seeded), drafts on vs off back to back in
one process (the order alternates each round), through the Engine (Job: detokenize, parse, usage),
the prompt cache warm for both. Decode tok/s = tokens after
the first ÷ time from the first event to the end. Workloads:

- rewrite: the model reproduces a source file of a few hundred lines with one change — target ≥ 2×;
- patch: a patch-style edit of a file (context lines copied) — target ≥ 2×;
  (both files are frozen copies in ``benchmarks/workloads/``, so the prompts never move);
- chat: free-form writing, where drafts rarely match — target ≥ 0.97×.

Outputs must be identical with and without drafts. ``--draft-model`` (a smaller model of the same
tokenizer) adds a draft model's drafts where the lookup has none; no smaller SmolLM2 is on this
machine, so ``--draft-layers N`` makes one of the embedded model's own first N layers (an early-exit
draft: the same weights, the last layers skipped). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tinytitan.cpu_blas import ensure_openblas

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from typing import Any  # noqa: E402

from bench_mlx import request  # noqa: E402

from tinytitan.cpu_blas import blas_state  # noqa: E402
from tinytitan.engine.device.draft_model import ModelDrafts  # noqa: E402
from tinytitan.engine.device.speculative import Speculator  # noqa: E402
from tinytitan.engine.events import Finished, TextDelta  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit  # noqa: E402
from tinytitan.engine.request import Sampling  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.loop import run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def workloads() -> dict[str, tuple[str, int]]:
    frozen = ROOT / "benchmarks" / "workloads"  # copies: the prompts stay put however the code changes
    source = (frozen / "job.py.txt").read_text(encoding="utf-8")
    small = (frozen / "batch.py.txt").read_text(encoding="utf-8")
    return {
        "rewrite": (
            "Here is a Python file:\n\n```python\n" + source + "```\n\nRewrite the whole file with one change: "
            "rename the function `_log_failure` to `_report_failure` everywhere. Output only the full file.",
            240,
        ),
        "patch": (
            "Here is a Python file, tinytitan/engine/device/batch.py:\n\n```python\n" + small + "```\n\n"
            "Write a unified diff (with three lines of context around each change) that renames the "
            "class `Output` to `StepOutput` everywhere in this file.",
            200,
        ),
        "chat": ("Write a long story about a lighthouse keeper and a storm.", 160),
    }


SAMPLING = {"greedy": Sampling(temperature=0.0), "default": Sampling(seed=7)}  # default: the model's own, seeded


async def generate(engine: Engine, prompt: str, n: int, sampling: str = "greedy") -> dict[str, Any]:
    job = await engine.prepare(replace(request(engine, [("user", prompt)], n), sampling=SAMPLING[sampling]))
    start = time.perf_counter()
    first: float | None = None
    text: list[str] = []
    usage = None
    async for event in job.events():
        if first is None:
            first = time.perf_counter()
        if isinstance(event, TextDelta):
            text.append(event.text)
        if isinstance(event, Finished):
            usage = event.usage
    end = time.perf_counter()
    assert usage is not None and first is not None
    return {"text": "".join(text), "tokens": usage.completion_tokens, "decode": (end - first), "ttft": first - start}


def measure(
    engine: Engine, backend: MlxBackend, drafts: bool, jobs: list[tuple[str, int]], sampling: str, draft: Any = None
) -> tuple[float, str, Any]:
    """Decode tok/s of ``jobs`` (prompt, tokens) sent at once (one: as one client; several:
    aggregate, from the first client's first token to the last one's end), their texts, the speculator."""
    import asyncio

    batch = backend.batch
    assert batch is not None
    batch.speculator = Speculator(ModelDrafts(draft) if draft is not None else None) if drafts else None

    async def all_at_once() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(generate(engine, prompt, n, sampling) for prompt, n in jobs)))

    results = run(all_at_once())
    if len(results) == 1:
        (r,) = results
        return (r["tokens"] - 1) / r["decode"] if r["decode"] > 0 else 0.0, r["text"], batch.speculator
    span = max(r["decode"] + r["ttft"] for r in results) - min(r["ttft"] for r in results)
    return sum(r["tokens"] - 1 for r in results) / span, "\n".join(r["text"] for r in results), batch.speculator


def passes(engine: Engine, backend: MlxBackend, context: int, rounds: int) -> None:
    """What a verify pass costs: one forward pass of w tokens after ``context`` tokens, ÷ one token's,
    with the NumPy prompt attention (``cpu_attention``, which takes every multi-token call) and with
    mlx's own; the two alternate, the KV cache trimmed back after each pass. Then the same for a
    batch of 2 and 4 rows (w tokens each ÷ one token each): what drafting beside other rows would
    cost a step."""

    def measure() -> list[str]:
        import mlx.core as mx
        from mlx_lm.models.cache import make_prompt_cache

        from tinytitan.engine.models.mlx import cpu_attention

        model = backend._model
        tokens = [(i * 7919) % 40000 + 100 for i in range(context + 16)]
        caches = {}
        for rows in (1, 2, 4):
            caches[rows] = cache = make_prompt_cache(model)
            for start in range(0, context, 512):
                chunk = tokens[start : min(start + 512, context)]
                model(mx.array([chunk] * rows), cache=cache)
                mx.eval([c.state for c in cache])
        times: dict[tuple[int, int, bool], list[float]] = {}
        ours = cpu_attention.installed()
        for _ in range(rounds):
            for rows, cache in caches.items():
                for width in (1, 2, 3, 5, 9):
                    for numpy_attention in (True, False) if ours else (False,):
                        (cpu_attention.install if numpy_attention else cpu_attention.uninstall)()
                        began = time.perf_counter()
                        mx.eval(model(mx.array([tokens[context : context + width]] * rows), cache=cache))
                        times.setdefault((rows, width, numpy_attention), []).append(time.perf_counter() - began)
                        for layer in cache:
                            layer.trim(width)
        if ours:
            cpu_attention.install()
        lines = []
        for rows in caches:
            one = statistics.median(times[(rows, 1, False)])
            lines.append(f"{rows} row(s), one token each after {context}: {one * 1000:.1f} ms")
            for (r, width, numpy_attention), spent in sorted(times.items()):
                if r == rows and width > 1:
                    which = "NumPy attention" if numpy_attention else "mlx attention"
                    lines.append(f"  {width} tokens each, {which}: ×{statistics.median(spent) / one:.2f} of one token")
        return lines

    for line in engine.device.run(measure).result():
        print(line, flush=True)


def load_draft(engine: Engine, backend: MlxBackend, model: str | None, layers: int) -> Any:
    """``--draft-model``'s weights, or the served model's first ``layers`` layers; None for neither."""
    from tinytitan.engine.models.mlx import loading
    from tinytitan.engine.models.mlx.resolve import resolve_model

    if not model and not layers:
        return None
    path = resolve_model(model).path if model else backend.source.path

    def load() -> Any:
        draft, _ = loading.load_weights(path, backend.dtype)
        if layers:
            draft.model.layers = draft.model.layers[:layers]
        return draft

    return engine.device.run(load).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured on/off pairs per workload")
    parser.add_argument("--only", default="", help="comma-separated workloads (rewrite, patch, chat)")
    parser.add_argument("--sampling", choices=sorted(SAMPLING), default="greedy", help="default: the model's, seeded")
    parser.add_argument("--passes", type=int, default=0, metavar="CONTEXT", help="time verify passes instead")
    parser.add_argument("--draft-model", help="a smaller model of the same tokenizer drafting too")
    parser.add_argument("--streams", type=int, default=1, help="the same request from N clients at once")
    parser.add_argument("--mix", default="", help="comma-separated workloads sent at once, one request each")
    parser.add_argument("--draft-layers", type=int, default=0, metavar="N", help="a draft of the first N layers")
    args = parser.parse_args()
    path = embedded_gguf_or_exit()
    print(f"{blas_state().describe()}; model {path.name}", flush=True)
    backend = MlxBackend(str(path), max_concurrent=max(1, args.streams, len(args.mix.split(","))))
    engine = Engine(backend)
    try:
        backend.load()
        run(generate(engine, "warm up", 2))
        draft = load_draft(engine, backend, args.draft_model, args.draft_layers)
        if args.passes:
            passes(engine, backend, args.passes, args.rounds * 3)
            return
        chosen = [w for w in args.only.split(",") if w] or list(workloads())
        runs = {name: [workloads()[name]] * args.streams for name in chosen}
        if args.mix:  # one request of each named workload, at once
            runs = {"mix of " + args.mix: [workloads()[w] for w in args.mix.split(",") if w]}
        for name, jobs in runs.items():
            for prompt, _n in dict(jobs).items():  # each prompt's KV state cached for both sides
                measure(engine, backend, True, [(prompt, 4)], args.sampling, draft)
            ratios, on_rates, off_rates = [], [], []
            for i in range(args.rounds):
                order = (False, True) if i % 2 == 0 else (True, False)
                results = {d: measure(engine, backend, d, jobs, args.sampling, draft) for d in order}
                (off, off_text, _), (on, on_text, spec) = results[False], results[True]
                same = "identical" if on_text == off_text else "DIFFERENT"
                accept = f", accepted {spec.accepted}/{spec.proposed} drafted ({spec.from_model} by the model"
                accept += f", {spec.together} passes of several rows)"
                rates = f"off {off:.1f} tok/s, on {on:.1f} tok/s, ×{on / off:.2f}"
                print(f"  {name} round {i + 1}: {rates}, {same}{accept}", flush=True)
                ratios.append(on / off)
                on_rates.append(on)
                off_rates.append(off)
            print(
                f"{name}: drafts on ÷ off median ×{statistics.median(ratios):.2f} "
                f"(range {min(ratios):.2f}–{max(ratios):.2f}); off {statistics.median(off_rates):.1f}, "
                f"on {statistics.median(on_rates):.1f} tok/s",
                flush=True,
            )
    finally:
        engine.shutdown()


if __name__ == "__main__":
    main()
