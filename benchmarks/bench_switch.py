"""Model switching in a catalog (issue 15), on the tiny and the Qwen3-0.6B-shape models, printing ratios.

    python benchmarks/bench_switch.py [--shapes tiny,0.6b] [--rounds 4] [--prefix 600] [--only a,b,c]

Each shape is served as a two-model catalog (``tiny-a`` / ``tiny-b``: the same weights linked under
two names, as ``tinytitan.testing.catalog`` builds it), so a switch is a real unload + load.

(a) switch time: unload A + load B's weights, averaged over ``--rounds`` switches, ÷ the cold first
    load of A's weights (what starting the server costs) — a switch should cost about one load;
(b) a one-token request that needs a switch ÷ the same request with its model already resident —
    the switch as a client sees it, through the Engine;
(c) after A → B → A, time to first token of a follow-up turn on A sharing a ``--prefix``-word
    prefix ÷ the cold first turn: the prompt cache is kept per model across switches (target ≪ 1),
    with the reused prefix reported as cached tokens.

Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas, openblas_active

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta  # noqa: E402
from tinytitan.engine.models.catalog import CatalogEntry, scan  # noqa: E402
from tinytitan.engine.models.manager import ModelManager  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.catalog import build_catalog  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402

GREEDY = Sampling(temperature=0.0)
OFF = ReasoningControls(level="off")


def factory(entry: CatalogEntry, model_id: str, device: str | None) -> MlxBackend:
    return MlxBackend(str(entry.path), model_id=model_id, device=device)


def request(model: str, text: str, max_tokens: int = 1) -> ChatRequest:
    return ChatRequest(
        model=model, messages=(Message("user", text),), max_tokens=max_tokens, sampling=GREEDY, reasoning=OFF
    )


async def first_token(engine: Engine, req: ChatRequest) -> tuple[float, int]:
    """Seconds from submission to the first event, and the cached prompt tokens the turn reused."""
    start = time.perf_counter()
    job = await engine.prepare(req)
    first = None
    cached = 0
    async for event in job.events():
        if first is None and isinstance(event, TextDelta | ReasoningDelta | Finished):
            first = time.perf_counter() - start
        if isinstance(event, Finished):
            cached = event.usage.cached_tokens
    return (first if first is not None else time.perf_counter() - start), cached


def bench_shape(shape: str, rounds: int, prefix_words: int, parts: set[str]) -> None:
    model_dir = tiny_model_dir(shape, "float32" if shape == "tiny" else "bfloat16")
    with tempfile.TemporaryDirectory() as tmp:
        catalog = scan([build_catalog(Path(tmp) / "models", model_dir)], quiet=True)
        models = ModelManager.from_catalog(catalog, factory)
        engine = Engine(models)
        try:
            asyncio.run(_bench(engine, models, shape, rounds, prefix_words, parts))
        finally:
            engine.shutdown()
            for backend in models.built():
                backend.unload()


async def _bench(engine: Engine, models: ModelManager, shape: str, rounds: int, words: int, parts: set[str]) -> None:
    # a request's validation renders with the named model's tokenizer before its turn comes, so by
    # the time a switch runs the tokenizer is there: load both first and time the weights alone
    start = time.perf_counter()
    for model_id in ("tiny-a", "tiny-b"):
        _ = models.backend(model_id).tokenizer  # type: ignore[attr-defined]
    tokenizers = (time.perf_counter() - start) / 2
    start = time.perf_counter()
    await asyncio.wrap_future(engine.device.activate("tiny-a"))
    cold = time.perf_counter() - start
    print(f"[{shape}] tokenizer load {tokenizers:.2f} s (once per model, without weights)", flush=True)
    if "a" in parts:
        for i in range(rounds):
            await asyncio.wrap_future(engine.device.activate("tiny-b" if i % 2 == 0 else "tiny-a"))
        switches = [s.unload_s + s.load_s for s in models.switches]
        mean = statistics.mean(switches)
        unload = statistics.mean(s.unload_s for s in models.switches)
        print(
            f"[{shape}] (a) cold load {cold:.2f} s; switch {mean:.2f} s mean over {len(switches)} "
            f"(unload {unload:.2f} + load {mean - unload:.2f}; min {min(switches):.2f}, max {max(switches):.2f}) "
            f"→ switch ÷ cold load {mean / cold:.2f}",
            flush=True,
        )
    if "b" in parts:
        resident = models.resident or "tiny-a"
        other = "tiny-b" if resident == "tiny-a" else "tiny-a"
        stay, _ = await first_token(engine, request(resident, "hello"))
        stay, _ = await first_token(engine, request(resident, "hello"))  # warm: template, tokenizer
        move, _ = await first_token(engine, request(other, "hello"))
        print(
            f"[{shape}] (b) 1-token request needing a switch {move:.2f} s ÷ same model resident "
            f"{stay:.3f} s = {move / stay:.0f}×",
            flush=True,
        )
    if "c" in parts:
        await first_token(engine, request("tiny-a", "warm up"))
        prefix = " ".join(f"word{i % 97}" for i in range(words))
        cold_turn, _ = await first_token(engine, request("tiny-a", prefix + "\n\nFirst question?", 4))
        await first_token(engine, request("tiny-b", "something else"))  # A is unloaded here
        back, cached = await first_token(engine, request("tiny-a", prefix + "\n\nFirst question?", 4))
        print(
            f"[{shape}] (c) after A → B → A, TTFT of the same {words}-word turn {back:.2f} s ÷ cold "
            f"{cold_turn:.2f} s = {back / cold_turn:.2f} (cached tokens {cached}; includes the load)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="tiny,0.6b")
    parser.add_argument("--rounds", type=int, default=4, help="switches measured in (a)")
    parser.add_argument("--prefix", type=int, default=600, help="words of shared prefix in (c)")
    parser.add_argument("--only", default="a,b,c")
    args = parser.parse_args()
    print(f"OpenBLAS preloaded: {openblas_active()}", flush=True)
    for shape in args.shapes.split(","):
        bench_shape(shape, args.rounds, args.prefix, set(args.only.split(",")))


if __name__ == "__main__":
    main()
