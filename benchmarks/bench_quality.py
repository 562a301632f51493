"""Answer quality of the embedded SmolLM2-135M-Instruct at its default sampling (issues 26 and 37).

    python benchmarks/bench_quality.py [--runs 20] [--max-tokens 48]

A quality check, not a unit test of a number: each of a few factual prompts is asked ``--runs``
times with seeds 0, 1, …, at three samplings: the defaults the server once applied to every model
(Qwen3's: temperature 0.6, top_p 0.95, top_k 20; issue 26's "before"), SmolLM2's model card
(temperature 0.2, top_p 0.9; issue 37's "before"), and no sampling values at all, so the model's own
defaults apply ("defaults": the card's temperature with top_p 0.5, measured here). Same process, same
seeds, through ``Engine.complete`` as every protocol does, with the model's published system prompt
(its template adds it). An answer is right when it holds the fact (Paris; 4 or four; blue). Prints
each prompt's score and the totals, and one wrong answer of each kind. Runs under the OpenBLAS
preload (re-exec via ``tinytitan.cpu_blas``). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import asyncio  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

from tinytitan.engine.build import build_engine  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit  # noqa: E402
from tinytitan.engine.request import ChatRequest, Message, Sampling  # noqa: E402
from tinytitan.engine.request.defaults import describe_defaults  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.settings import Settings  # noqa: E402

PROMPTS = {
    "What is the capital of France?": re.compile(r"\bparis\b", re.I),
    "What is 2+2?": re.compile(r"\b(4|four)\b", re.I),
    "What colour is the sky on a clear day?": re.compile(r"\bblue\b", re.I),
}
SAMPLINGS: dict[str, dict[str, float]] = {
    "qwen3": {"temperature": 0.6, "top_p": 0.95, "top_k": 20},  # Qwen3's, once applied to every model
    "card": {"temperature": 0.2, "top_p": 0.9},  # SmolLM2's model card
    "defaults": {},  # the model's own defaults, as a request that sets nothing gets them
}


async def score(
    engine: Engine, prompt: str, right: re.Pattern[str], runs: int, cap: int, **sampling: float
) -> tuple[int, str | None]:
    """(right answers, one wrong answer) over seeds 0 … runs-1."""
    good, wrong = 0, None
    for seed in range(runs):
        request = ChatRequest(
            model=engine.info.id,
            messages=(Message("user", prompt),),
            sampling=Sampling(seed=seed, **sampling),  # type: ignore[arg-type]
            max_tokens=cap,
        )
        text = (await engine.complete(request)).text.strip()
        if right.search(text):
            good += 1
        elif wrong is None:
            wrong = text
    return good, wrong


async def main(runs: int, cap: int) -> None:
    path = embedded_gguf_or_exit()
    backend = MlxBackend(str(path))
    backend.load()
    engine = build_engine(Settings(), backend)
    print(f"{engine.info.id}: defaults {describe_defaults(engine.info)}; {runs} seeded runs a prompt, cap {cap}")
    totals = dict.fromkeys(SAMPLINGS, 0)
    try:
        for prompt, right in PROMPTS.items():
            for label, sampling in SAMPLINGS.items():
                started = time.monotonic()
                good, wrong = await score(engine, prompt, right, runs, cap, **sampling)
                totals[label] += good
                seconds = time.monotonic() - started
                shown = f"   e.g. wrong: {wrong[:90]!r}" if wrong else ""
                print(f"{label:8} {good:2}/{runs} right  {prompt!r} ({seconds:.0f} s){shown}", flush=True)
    finally:
        engine.shutdown()
    n = runs * len(PROMPTS)
    described = {"qwen3": "temperature 0.6, top_p 0.95, top_k 20", "card": "temperature 0.2, top_p 0.9"}
    described["defaults"] = describe_defaults(engine.info)
    print("total: " + "; ".join(f"{k} ({described[k]}) {totals[k]}/{n}" for k in SAMPLINGS))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.max_tokens))
