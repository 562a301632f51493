"""Compaction from the cached prompt (issue 40), on the embedded SmolLM2-135M-Instruct, printing ratios.

    python benchmarks/bench_compaction.py [--tokens 6000] [--rounds 2]

A synthetic coding session of about ``--tokens`` tokens runs its last turn (a reply of up to 48
tokens), then is compacted right after it, back to back in this process, each way in turn:

- after: the compaction as a continuation of the conversation (``compact``, what every entry point
  runs now) — the share of its first pass's prompt served from the prompt cache (target ≥ 0.9), the
  time to the note's first token ÷ the session's cold prefill (target ≤ 0.15), the whole compaction;
- before: the same session read as a ``[role] text`` transcript in a new prompt (``as_transcript``,
  how every pass read it before) — the same three figures;
- Codex's ``compaction_trigger`` (``POST /v1/responses``, over a real loopback socket, right after
  the same turn): the cached share of its passes and the whole time;
- ``tinytitan compact``'s cost: a fresh process has no warm cache, so the same compaction after the
  cache is emptied (the model load aside, which the CLI adds).

The cold prefill is the session's last turn with an empty prompt cache: its time to first token.
Runs under the OpenBLAS preload (re-exec via ``tinytitan.cpu_blas``), fp32 as the server runs it.
Not part of the test run. Figures from a shared machine are noisy: compare the ratios, not seconds.
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
import time  # noqa: E402
from collections.abc import Coroutine  # noqa: E402
from typing import Any, TypeVar  # noqa: E402

import httpx  # noqa: E402

from tinytitan.engine.events import Finished, TextDelta  # noqa: E402
from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit  # noqa: E402
from tinytitan.engine.passes.compaction import CompactionResult, compact, conversation  # noqa: E402
from tinytitan.engine.request import ChatRequest, Message, Sampling  # noqa: E402
from tinytitan.testing.server import LiveServer, live_server  # noqa: E402

T = TypeVar("T")
FILES = ["src/app.py", "src/db.py", "tests/test_db.py", "migrations/001.sql", "pyproject.toml", "README.md"]


def turns(n: int) -> list[tuple[str, str]]:
    """``n`` (user, assistant) pairs of a coding session: names, numbers and files to keep."""
    out = []
    for i in range(n):
        path = FILES[i % len(FILES)]
        user = (
            f"Step {i + 1}: I'm Dana, working on the billing service. Please look at {path}: the test "
            f"suite takes {40 + 7 * i} seconds and the p95 latency of /invoices is {120 + 13 * i} ms. "
            f"Keep the public API stable and do not touch {FILES[(i + 2) % len(FILES)]}."
        )
        assistant = (
            f"I read {path}. The slow part is the query that loads invoice lines one by one "
            f"({3 + i} round trips per invoice). I batched it into one SELECT with an IN clause and "
            f"added an index on invoice_lines(invoice_id). The suite now takes {30 + 5 * i} seconds "
            f"and /invoices p95 dropped to {90 + 9 * i} ms. I rejected caching the lines in memory: "
            f"it would go stale after each write. Next I will check {FILES[(i + 1) % len(FILES)]} "
            "for the same pattern, and run the whole suite again before the commit."
        )
        out.append((user, assistant))
    return out


def session_of(backend: MlxBackend, model: str, tokens: int) -> tuple[Message, ...]:
    """The session's messages (ending with a user question), about ``tokens`` tokens rendered."""
    system = Message("system", "You are a careful coding assistant. Answer briefly and precisely.")
    for n in range(1, 400):
        pairs = turns(n)
        messages = [system] + [Message(r, t) for u, a in pairs for r, t in (("user", u), ("assistant", a))]
        messages.append(Message("user", "What should we do next?"))
        rendered = backend.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True, tokenize=True
        )
        if len(rendered) >= tokens:
            return tuple(messages)
    raise SystemExit("could not build the session")


def on_loop(live: LiveServer, coro: Coroutine[Any, Any, T]) -> T:
    assert live.loop is not None
    return asyncio.run_coroutine_threadsafe(coro, live.loop).result()


async def last_turn(live: LiveServer, session: tuple[Message, ...]) -> tuple[float, str, int]:
    """The session's last turn: (time to its first token, its reply, its prompt tokens)."""
    engine = live.engine
    request = ChatRequest(engine.info.id, session, sampling=Sampling(temperature=0.0), max_tokens=48, stream=True)
    start = time.perf_counter()
    job = await engine.prepare(request)
    first: float | None = None
    text: list[str] = []
    prompt = 0
    async for event in job.events():
        if first is None:
            first = time.perf_counter() - start
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Finished):
            prompt = event.usage.prompt_tokens
    assert first is not None
    return first, "".join(text).strip(), prompt


def clear_cache(live: LiveServer) -> None:
    backend = live.engine.backend
    assert isinstance(backend, MlxBackend)
    live.engine.device.run(backend.prompt_cache.clear).result()


def run_compaction(live: LiveServer, messages: tuple[Message, ...], *, as_transcript: bool) -> dict[str, Any]:
    start = time.perf_counter()
    request = conversation(live.engine.info.id, messages)
    result: CompactionResult = on_loop(live, compact(live.engine, request, as_transcript=as_transcript))
    whole = time.perf_counter() - start
    first = result.first_pass
    return {
        "share": first.cached_tokens / max(1, first.prompt_tokens),
        "prompt": first.prompt_tokens,
        "first": result.first_token_s or whole,
        "whole": whole,
        "mode": result.mode,
        "passes": result.passes,
        "written": result.usage.completion_tokens,
    }


def trigger(live: LiveServer, messages: tuple[Message, ...]) -> dict[str, Any]:
    """Codex's in-band compaction over HTTP: the conversation, then ``{"type": "compaction_trigger"}``."""
    items: list[dict[str, Any]] = [{"type": "message", "role": m.role, "content": m.content} for m in messages]
    body = {"model": live.engine.info.id, "input": [*items, {"type": "compaction_trigger"}], "store": False}
    start = time.perf_counter()
    response = httpx.post(live.url + "/v1/responses", json=body, timeout=3600)
    whole = time.perf_counter() - start
    response.raise_for_status()
    usage = response.json()["usage"]
    return {"share": usage["input_tokens_details"]["cached_tokens"] / usage["input_tokens"], "whole": whole}


def line(name: str, figures: list[dict[str, Any]], cold: float) -> str:
    share = statistics.median(f["share"] for f in figures)
    first = statistics.median(f["first"] for f in figures)
    whole = statistics.median(f["whole"] for f in figures)
    last = figures[-1]
    return (
        f"  {name}: cached share {share:.3f}; note's first token {first:.2f} s = {first / cold:.3f} of the cold "
        f"prefill; whole {whole:.1f} s ({last['mode']}, {last['passes']} pass(es), {last['written']} tokens "
        f"written, first pass prompt {last['prompt']} tokens)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=6000, help="the session's rendered size")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (each: every way, back to back)")
    args = parser.parse_args()
    path = embedded_gguf_or_exit()
    print(f"OpenBLAS preloaded: {openblas_active()}; model {path.name}", flush=True)
    backend = MlxBackend(str(path))
    with live_server(backend) as live:
        live.engine.device.run(backend.load).result()
        session = session_of(backend, live.engine.info.id, args.tokens)
        figures: dict[str, list[dict[str, Any]]] = {"after": [], "before": [], "trigger": [], "cold": []}
        colds: list[float] = []
        for round_ in range(args.rounds):
            clear_cache(live)
            cold, reply, prompt = on_loop(live, last_turn(live, session))
            colds.append(cold)
            messages = (*session, Message("assistant", reply))
            print(
                f"round {round_}: session {prompt} tokens, cold prefill (time to first token) {cold:.2f} s", flush=True
            )
            for name in ("after", "before", "trigger", "cold"):
                if name == "cold":
                    clear_cache(live)  # what a fresh `tinytitan compact` process starts with
                else:
                    on_loop(live, last_turn(live, session))  # right after the last turn: the cache holds it
                if name == "trigger":
                    figures[name].append(trigger(live, messages))
                    print(f"  trigger: {figures[name][-1]}", flush=True)
                    continue
                figures[name].append(run_compaction(live, messages, as_transcript=name == "before"))
                print(f"  {name}: {figures[name][-1]}", flush=True)
        cold = statistics.median(colds)
        print(f"session cold prefill (median of {len(colds)}): {cold:.2f} s", flush=True)
        print(line("after  (continuation)       ", figures["after"], cold), flush=True)
        print(line("before (transcript)         ", figures["before"], cold), flush=True)
        print(line("tinytitan compact (no cache)", figures["cold"], cold), flush=True)
        share = statistics.median(f["share"] for f in figures["trigger"])
        whole = statistics.median(f["whole"] for f in figures["trigger"])
        print(
            f"  compaction_trigger over HTTP: cached share of its passes {share:.3f}; whole {whole:.1f} s", flush=True
        )


if __name__ == "__main__":
    main()
