"""Benchmarks for the mlx backend on the Qwen3-0.6B-shape model (random weights), printing ratios.

    python benchmarks/bench_mlx.py [--decode 32] [--prefix 4096] [--baseline-decode 4] [--only a,b,c]

(a) decode tok/s through the server (streaming Chat Completions over a real loopback socket) — and
    through the Engine alone — ÷ direct ``mlx_lm.stream_generate`` with the same loaded model and
    prompt — target ≥ 0.97;
(b) time to first token of a follow-up turn sharing a ~4k-token prefix ÷ the cold first turn —
    target ≤ 0.1;
(c) our CPU engine (4-bit checkpoint dequantized to fp32, OpenBLAS) vs ``mlx_lm.stream_generate``
    on the same 4-bit checkpoint as-is: decode and prefill tok/s — target ≥ 10×.

Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``). Not part of the test run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas, openblas_active

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from tinytitan.engine.events import Finished  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling  # noqa: E402
from tinytitan.engine.service import Engine  # noqa: E402
from tinytitan.testing.loop import run  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402

GREEDY = Sampling(temperature=0.0)
OFF = ReasoningControls(enable_thinking=False)


def request(engine: Engine, messages: list[tuple[str, str]], max_tokens: int) -> ChatRequest:
    return ChatRequest(
        model=engine.info.id,
        messages=tuple(Message(role, text) for role, text in messages),
        max_tokens=max_tokens,
        sampling=GREEDY,
        reasoning=OFF,
        stream=True,
    )


async def stream(engine: Engine, req: ChatRequest) -> dict[str, Any]:
    """Submit and stream; times of the first event and of Finished, and the usage."""
    backend = engine.backend
    assert isinstance(backend, MlxBackend)
    start, start_tokens = time.perf_counter(), backend.tokens_generated
    job = await engine.prepare(req)
    first: float | None = None
    first_tokens = 0
    usage = None
    async for event in job.events():
        now = time.perf_counter()
        if first is None:
            first, first_tokens = now, backend.tokens_generated
        if isinstance(event, Finished):
            usage = event.usage
    end = time.perf_counter()
    assert usage is not None and first is not None
    return {
        "start": start,
        "first": first,
        "end": end,
        "usage": usage,
        "first_tokens": first_tokens,
        "start_tokens": start_tokens,
    }


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "model",
        "token",
        "cache",
        "prefix",
        "engine",
        "server",
        "local",
        "fast",
        "decode",
        "prefill",
        "request",
        "stream",
        "answer",
        "reason",
        "tool",
        "call",
    ]
    return " ".join(rng.choice(vocab) for _ in range(n))


def direct_decode(backend: MlxBackend, tokens: list[int], n: int) -> float:
    """Decode tok/s of mlx_lm.stream_generate with the backend's own loaded model."""
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    times = [
        time.perf_counter()
        for _ in stream_generate(backend._model, backend.tokenizer, tokens, max_tokens=n, sampler=make_sampler(0.0))
    ]
    return (len(times) - 1) / (times[-1] - times[0])


def server_decode(url: str, backend: MlxBackend, text: str, n: int, sampling: dict[str, Any] | None = None) -> float:
    """Decode tok/s seen by a streaming Chat Completions client (first content chunk → last).

    ``sampling``: the request's sampling fields (default greedy; ``{}`` for the model's defaults).
    """
    import httpx

    body = {
        "model": backend.info.id,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": n,
        **({"temperature": 0} if sampling is None else sampling),
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    first: float | None = None
    first_tokens = last_tokens = 0
    last = 0.0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and _content(line[len("data: ") :]):
                last, last_tokens = time.perf_counter(), backend.tokens_generated
                if first is None:
                    first, first_tokens = last, last_tokens
    assert first is not None and last > first
    return (last_tokens - first_tokens) / (last - first)


def _content(chunk: str) -> str:
    """The text a Chat Completions stream chunk carries (empty for role, usage and finish chunks)."""
    import json

    choices = json.loads(chunk).get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def bench_a(engine: Engine, n: int, rounds: int) -> None:
    from tinytitan.testing.server import live_server

    backend = engine.backend
    assert isinstance(backend, MlxBackend)
    rates: dict[str, list[float]] = {"server": [], "engine": [], "direct": []}
    ratios: dict[str, list[float]] = {"server": [], "engine": []}
    with live_server(backend) as live:
        for round_ in range(rounds + 1):  # round 0 warms up every path; they run back to back
            text = f"Round {round_}: " + words(24, round_)
            req = request(engine, [("user", text)], n)
            backend.prompt_cache.clear()
            server_rate = server_decode(live.url, backend, text, n)
            backend.prompt_cache.clear()
            r = run(stream(engine, req))
            generated_after_first = r["usage"].completion_tokens - (r["first_tokens"] - r["start_tokens"])
            engine_rate = generated_after_first / (r["end"] - r["first"])
            tokens = backend.render(run(engine.validate(req))[0]).tokens
            direct_rate = direct_decode(backend, tokens, n)
            if round_:
                for name, rate in (("server", server_rate), ("engine", engine_rate), ("direct", direct_rate)):
                    rates[name].append(rate)
                ratios["server"].append(server_rate / direct_rate)
                ratios["engine"].append(engine_rate / direct_rate)
            print(
                f"  (a) round {round_}: server {server_rate:.2f}, engine {engine_rate:.2f}, "
                f"direct {direct_rate:.2f} tok/s",
                flush=True,
            )
    d = max(rates["direct"])
    for name in ("server", "engine"):
        best = max(rates[name])
        print(
            f"(a) decode through the {name} ÷ direct stream_generate: best {best:.2f} ÷ {d:.2f} tok/s "
            f"= {best / d:.3f}, median of paired ratios {statistics.median(ratios[name]):.3f}  (target ≥ 0.97)",
            flush=True,
        )


def bench_b(engine: Engine, prefix_words: int) -> None:
    backend = engine.backend
    assert isinstance(backend, MlxBackend)
    backend.prompt_cache.clear()
    system = "You are a careful assistant. Context follows.\n" + words(prefix_words, 7)
    first_turn = [("system", system), ("user", "Summarise the context.")]
    cold = run(stream(engine, request(engine, first_turn, 4)))
    follow = [*first_turn, ("assistant", "It is a list of words."), ("user", "Which word is most common?")]
    warm = run(stream(engine, request(engine, follow, 4)))
    t_cold, t_warm = cold["first"] - cold["start"], warm["first"] - warm["start"]
    c, w = cold["usage"], warm["usage"]
    print(f"  (b) cold: {c.prompt_tokens} prompt tokens, first token after {t_cold:.2f} s", flush=True)
    print(
        f"  (b) follow-up: {w.prompt_tokens} prompt tokens, {w.cached_tokens} reused, first token after {t_warm:.2f} s",
        flush=True,
    )
    print(f"(b) follow-up TTFT ÷ cold TTFT = {t_warm / t_cold:.3f}  (target ≤ 0.1)", flush=True)


def bench_c(quant_dir: Path, prompt_words: int, n_ours: int, n_base: int) -> None:
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    backend = MlxBackend(str(quant_dir))
    engine = Engine(backend)
    try:
        backend.load()
        req = request(engine, [("user", words(prompt_words, 11))], n_ours)
        run(stream(engine, request(engine, [("user", "warm up")], 2)))
        backend.prompt_cache.clear()
        r = run(stream(engine, req))
        prompt_tokens = r["usage"].prompt_tokens
        ours_prefill = prompt_tokens / (r["first"] - r["start"])
        after_first = r["usage"].completion_tokens - (r["first_tokens"] - r["start_tokens"])
        ours_decode = after_first / (r["end"] - r["first"])
        tokens = backend.render(run(engine.validate(req))[0]).tokens
    finally:
        engine.shutdown()
        backend.unload()
    print(
        f"  (c) ours (fp32 from 4-bit, OpenBLAS {openblas_active()}): prefill {ours_prefill:.1f} tok/s "
        f"({prompt_tokens} tokens), decode {ours_decode:.2f} tok/s",
        flush=True,
    )
    model, tokenizer = load(str(quant_dir))  # as-is: 4-bit weights, bf16 scales
    base_tokens = tokens[: max(8, len(tokens) // 4)]  # the as-is path is slow: a shorter prompt
    times: list[float] = []
    prompt_tps = 0.0
    for resp in stream_generate(model, tokenizer, base_tokens, max_tokens=n_base, sampler=make_sampler(0.0)):
        times.append(time.perf_counter())
        prompt_tps = resp.prompt_tps
    base_decode = (len(times) - 1) / (times[-1] - times[0])
    print(
        f"  (c) mlx_lm as-is (4-bit): prefill {prompt_tps:.2f} tok/s ({len(base_tokens)} tokens), "
        f"decode {base_decode:.2f} tok/s",
        flush=True,
    )
    print(
        f"(c) CPU engine ÷ as-is on the 4-bit checkpoint: decode {ours_decode / base_decode:.1f}×, "
        f"prefill {ours_prefill / prompt_tps:.1f}×  (target ≥ 10×)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decode", type=int, default=32, help="tokens decoded in (a) and (c)")
    parser.add_argument("--prefix", type=int, default=3500, help="words of shared prefix in (b) (~4k tokens)")
    parser.add_argument("--prompt", type=int, default=200, help="words of prompt for prefill in (c)")
    parser.add_argument("--baseline-decode", type=int, default=4, help="tokens decoded by the slow as-is path in (c)")
    parser.add_argument("--rounds", type=int, default=4, help="measured engine/direct pairs in (a)")
    parser.add_argument("--only", default="a,b,c")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    print(f"OpenBLAS preloaded: {openblas_active()}", flush=True)
    if parts & {"a", "b"}:
        model_dir = tiny_model_dir("0.6b", "bfloat16")
        engine = Engine(MlxBackend(str(model_dir)))
        try:
            engine.backend.load()
            if "a" in parts:
                bench_a(engine, args.decode, args.rounds)
            if "b" in parts:
                bench_b(engine, args.prefix)
        finally:
            engine.shutdown()
            engine.backend.unload()
    if "c" in parts:
        bench_c(tiny_model_dir("0.6b", "bfloat16", 4), args.prompt, args.decode, args.baseline_decode)


if __name__ == "__main__":
    main()
