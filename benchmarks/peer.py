"""The peer benchmark: one workload against TinyTitan and against ``mlx_lm.server`` or llama.cpp; prints ratios.

    python benchmarks/peer.py [--model DIR] [--only session,streams,restart] [--streams 4]
                              [--url URL --model-name ID] [--peer-url URL] [--tinytitan-arg=--max-concurrent=4 …]
    python benchmarks/peer.py --peer llama.cpp [--gguf FILE] [--llama-server PATH | --llama-python PY] …

Both servers are started here, one after the other (never at once: they would share the cores), on
the same model directory (default: the Qwen3-0.6B-shape fp32 build of ``tinytitan.testing.tiny_model``)
and with the same BLAS preloaded into both (``tinytitan.cpu_blas.find_blas``: BLIS when installed,
else OpenBLAS; ``TINYTITAN_BLAS=openblas`` for OpenBLAS). ``--url`` / ``--peer-url`` point a
side at a server that is already running instead (any OpenAI-compatible URL).

``--peer llama.cpp``: the peer is llama.cpp's own ``llama-server`` (``--streams`` parallel slots on
one unified KV cache, continuous batching; built by ``tools/llama/build.sh``), or, where none is
found, ``llama-cpp-python``'s server in ``--llama-python``; both sides serve the same GGUF file
(default: the 0.6B-shape model as Q8_0, ``llama_servers.peer_gguf``, whose template renders the
tools). Each turn prints both sides' prompt token counts (a mismatch is flagged: the sides did not
see the same prompt) and llama-server's own split of the turn (prompt tokens read, reused from its
cache, and its prefill and decode rates) beside ours.

- **session** — a coding-agent session, streaming Chat Completions: a ~2k-token system prompt and 12
  tools, then 3 turns, each adding a scripted assistant tool call and its tool result (scripted, so
  both servers see the very same prompts). Time to first token per turn and the session's wall time.
- **streams** — one stream alone, then K at once (different prompts): aggregate tok/s ÷ one stream.
- **restart** (TinyTitan only) — the session's first turn after a server restart, with
  ``--prompt-cache-dir`` (the disk tier, warmed by a run before the restart) and without: TTFT ratio.

Sampling is the same explicit setting for both (``--sampling default``: Qwen3's temperature 0.6,
top_p 0.95, top_k 20; ``greedy``: temperature 0). Times on this shared box are noisy: the ratios of
back-to-back runs are the figures to read. Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_session import session_turns, tools

from tinytitan.cpu_blas import find_blas, preload_env
from tinytitan.testing.process import free_port, serve_process

SAMPLING = {
    "default": {"temperature": 0.6, "top_p": 0.95, "top_k": 20},
    "greedy": {"temperature": 0.0},
}


@dataclass
class Target:
    name: str
    url: str  # …/v1
    model: str


@dataclass
class Stream:
    start: float
    first: float | None = None
    end: float = 0.0
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    chunks: list[float] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # llama-server's own (prompt_n, prompt_ms, …)

    @property
    def ttft(self) -> float:
        return (self.first or self.end) - self.start


async def stream_chat(client: httpx.AsyncClient, target: Target, body: dict[str, Any]) -> Stream:
    body = {
        "model": target.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"enable_thinking": False},
        **body,
    }
    s = Stream(time.perf_counter())
    async with client.stream("POST", target.url + "/chat/completions", json=body, timeout=1800) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{target.name}: HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"):
                    now = time.perf_counter()
                    s.first = s.first or now
                    s.chunks.append(now)
            usage = chunk.get("usage")
            if usage:
                s.tokens = int(usage.get("completion_tokens") or 0)
                s.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                s.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
            if isinstance(chunk.get("timings"), dict):
                s.timings = chunk["timings"]
    s.end = time.perf_counter()
    s.tokens = s.tokens or len(s.chunks)
    return s


async def run_session(target: Target, sampling: dict[str, Any], max_tokens: int) -> tuple[float, list[Stream]]:
    async with httpx.AsyncClient() as client:
        start = time.perf_counter()
        turns = []
        for messages in session_turns():
            body = {"messages": messages, "tools": tools(), "max_tokens": max_tokens, **sampling}
            turns.append(await stream_chat(client, target, body))
        return time.perf_counter() - start, turns


async def run_streams(target: Target, sampling: dict[str, Any], k: int, max_tokens: int) -> tuple[float, float]:
    """(one stream's tok/s, K streams' aggregate tok/s), each over its whole wall time."""

    def body(i: int) -> dict[str, Any]:
        text = f"Stream {i}: write a long story about a lighthouse keeper number {i}."
        return {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, **sampling}

    async with httpx.AsyncClient() as client:
        await stream_chat(client, target, {**body(99), "max_tokens": 2})  # warm: weights loaded
        one = await stream_chat(client, target, body(0))
        single = one.tokens / (one.end - one.start)
        start = time.perf_counter()
        many = await asyncio.gather(*(stream_chat(client, target, body(i + 1)) for i in range(k)))
        aggregate = sum(s.tokens for s in many) / (time.perf_counter() - start)
    return single, aggregate


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 600, path: str = "/health") -> None:
    """Until ``url + path`` answers 200 (``path``: a route that answers once the model is loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + path, timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError("the server did not start in time")


@contextlib.contextmanager
def stopped_after(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """Terminate ``process`` on leaving (killed if it has not gone within 30 s)."""
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def warm_up(v1: str, model: str) -> None:
    """One tiny request, so loading the weights is not timed."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    httpx.post(v1 + "/chat/completions", json=body, timeout=600).raise_for_status()


@contextlib.contextmanager
def tinytitan(model_dir: Path, extra: list[str], url: str | None, name: str) -> Iterator[Target]:
    if url:
        yield Target("TinyTitan", url.rstrip("/"), name)
        return
    with serve_process("--model", str(model_dir), "--model-id", name, *extra, startup_timeout=600) as server:
        warm_up(server.v1, name)
        yield Target("TinyTitan", server.v1, name)


@contextlib.contextmanager
def mlx_lm_server(model_dir: Path, url: str | None) -> Iterator[Target]:
    if url:
        yield Target("mlx_lm.server", url.rstrip("/"), "default_model")
        return
    port = free_port()
    env = dict(os.environ)
    blas = find_blas()  # the library TinyTitan preloads (same env, same choice)
    if blas:
        env = preload_env(blas, {**env, "LD_PRELOAD": ""})
    cmd = [sys.executable, "-m", "mlx_lm.server", "--model", str(model_dir), "--port", str(port)]
    cmd += ["--log-level", "WARNING", "--max-tokens", "4096"]
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with stopped_after(process):
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process)
        warm_up(base + "/v1", "default_model")
        yield Target("mlx_lm.server", base + "/v1", "default_model")


def decode_rate(s: Stream) -> float:
    """Tokens/s after the first token (0 when fewer than two)."""
    span = (s.chunks[-1] if s.chunks else s.end) - (s.first or s.end)
    return (s.tokens - 1) / span if span > 0 and s.tokens > 1 else 0.0


def show_session(target: Target, wall: float, turns: list[Stream]) -> None:
    print(f"  {target.name} session: wall {wall:.2f} s", flush=True)
    for i, t in enumerate(turns):
        line = f"    turn {i + 1}: {t.prompt_tokens} prompt ({t.cached_tokens} cached), TTFT {t.ttft:.2f} s"
        line += f", {t.tokens} tokens at {decode_rate(t):.1f} tok/s"
        if t.timings:  # llama-server's own account of the turn
            read, ms, reused = (t.timings.get(k, 0) for k in ("prompt_n", "prompt_ms", "cache_n"))
            line += f"; its own split: read {read:.0f} in {ms / 1000:.2f} s ({read / max(ms, 1e-9) * 1000:.0f} tok/s)"
            line += f", {reused:.0f} reused, decode {t.timings.get('predicted_per_second', 0):.1f} tok/s"
        print(line, flush=True)


def compare(results: dict[str, dict[str, Any]], peer_name: str, k: int) -> None:
    """The ratios TinyTitan ÷ the peer; per turn, both sides' prompt token counts (flagged when they differ)."""
    ours, peer = results.get("TinyTitan"), results.get(peer_name)
    target = "  (target ≤ 0.8)" if peer_name == "mlx_lm.server" else ""
    if ours and peer and "wall" in ours:
        print(f"session wall TinyTitan ÷ {peer_name} = {ours['wall'] / peer['wall']:.3f}{target}")
        ttfts = [f"{a.ttft / b.ttft:.2f}" for a, b in zip(ours["turns"], peer["turns"], strict=True)]
        print(f"TTFT per turn TinyTitan ÷ {peer_name} = {', '.join(ttfts)}")
        counts = [(a.prompt_tokens, b.prompt_tokens) for a, b in zip(ours["turns"], peer["turns"], strict=True)]
        same = all(a == b for a, b in counts)
        shown = ", ".join(f"{a} / {b}" for a, b in counts)
        print(f"prompt tokens per turn TinyTitan / {peer_name}: {shown}" + ("" if same else "  MISMATCH"))
    if ours and peer and "single" in ours:
        print(
            f"{k} streams aggregate ÷ one stream: TinyTitan {ours['aggregate'] / ours['single']:.2f}, "
            f"{peer_name} {peer['aggregate'] / peer['single']:.2f}"
            + ("  (target ≥ 2.0 for TinyTitan)" if target else "")
            + f"; aggregate TinyTitan ÷ {peer_name} = {ours['aggregate'] / peer['aggregate']:.2f}"
            + f"; one stream TinyTitan ÷ {peer_name} = {ours['single'] / peer['single']:.2f}"
        )


def part_restart(model_dir: Path, args: argparse.Namespace, sampling: dict[str, Any]) -> None:
    first_turn = session_turns()[0]
    body = {"messages": first_turn, "tools": tools(), "max_tokens": 4, **sampling}

    async def first_ttft(target: Target) -> Stream:
        async with httpx.AsyncClient() as client:
            return await stream_chat(client, target, body)

    cache_dir = Path(tempfile.mkdtemp(prefix="tinytitan-peer-kv-"))
    try:
        with_disk = [*args.tinytitan_arg, "--prompt-cache-dir", str(cache_dir)]
        with tinytitan(model_dir, with_disk, None, args.model_name) as target:
            warmup = asyncio.run(first_ttft(target))  # fills the disk tier; SIGTERM lets the writer finish
        with tinytitan(model_dir, with_disk, None, args.model_name) as target:
            warm = asyncio.run(first_ttft(target))
        with tinytitan(model_dir, list(args.tinytitan_arg), None, args.model_name) as target:
            cold = asyncio.run(first_ttft(target))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(
        f"  restart: prompt {warm.prompt_tokens} tokens; before the restart TTFT {warmup.ttft:.2f} s; after it "
        f"with the disk tier {warm.ttft:.2f} s ({warm.cached_tokens} cached), without {cold.ttft:.2f} s",
        flush=True,
    )
    print(f"restart: first-turn TTFT with the disk tier ÷ without = {warm.ttft / cold.ttft:.3f}  (target ≤ 0.2)")


def llama_side(args: argparse.Namespace) -> tuple[str, Any]:
    """llama.cpp's server on the GGUF that TinyTitan serves too (``args.model`` becomes the file)."""
    from llama_servers import choose, llama_cpp, peer_gguf

    choice = choose(args.llama_server, args.llama_python, required=not args.peer_url)
    args.model = args.gguf or peer_gguf()
    if args.peer_url or choice is None:
        return "llama.cpp", lambda: peer_at(args.peer_url, "llama.cpp", args.model.name)
    print(choice.describe(), flush=True)
    return choice.label, lambda: llama_cpp(choice, args.model, slots=args.streams, context=8192)


@contextlib.contextmanager
def peer_at(url: str, name: str, model: str) -> Iterator[Target]:
    yield Target(name, url.rstrip("/"), model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model directory (default: the 0.6B-shape fp32 build)")
    parser.add_argument("--model-name", default="peer-model", help="model id TinyTitan serves")
    parser.add_argument("--url", help="a running TinyTitan (…/v1) instead of starting one")
    parser.add_argument("--peer-url", help="a running peer (…/v1) instead of starting mlx_lm.server")
    parser.add_argument("--only", default="session,streams,restart")
    parser.add_argument("--streams", type=int, default=4, help="K parallel streams")
    parser.add_argument("--turn-tokens", type=int, default=32, help="max_tokens of each session turn")
    parser.add_argument("--stream-tokens", type=int, default=48, help="max_tokens of each parallel stream")
    parser.add_argument("--sampling", choices=sorted(SAMPLING), default="default")
    parser.add_argument("--tinytitan-arg", action="append", default=[], help="extra serve flag (repeatable)")
    parser.add_argument("--peer", choices=["mlx_lm", "llama.cpp"], default="mlx_lm", help="the other server")
    parser.add_argument("--gguf", type=Path, help="llama.cpp: the GGUF both serve (default: the 0.6B shape, Q8_0)")
    parser.add_argument("--llama-server", help="llama.cpp: the llama-server binary (default: tools/llama/build.sh's)")
    parser.add_argument("--llama-python", help="llama.cpp: an interpreter with llama-cpp-python[server] (fallback)")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    sides = [("TinyTitan", lambda: tinytitan(args.model, list(args.tinytitan_arg), args.url, args.model_name))]
    if args.peer == "llama.cpp":
        sides.append(llama_side(args))
    else:
        if args.model is None:
            from tinytitan.testing.tiny_model import tiny_model_dir

            args.model = tiny_model_dir("0.6b", "float32")
        sides.append(("mlx_lm.server", lambda: mlx_lm_server(args.model, args.peer_url)))
    sampling = SAMPLING[args.sampling]
    print(f"model {args.model}; sampling {sampling}; BLAS {find_blas()}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for name, start in sides:
        if not parts & {"session", "streams"}:
            break
        with start() as target:
            out: dict[str, Any] = {}
            if "session" in parts:
                wall, turns = asyncio.run(run_session(target, sampling, args.turn_tokens))
                show_session(target, wall, turns)
                out["wall"], out["turns"] = wall, turns
            if "streams" in parts:
                single, aggregate = asyncio.run(run_streams(target, sampling, args.streams, args.stream_tokens))
                print(
                    f"  {name} streams: one {single:.2f} tok/s, {args.streams} at once {aggregate:.2f} tok/s "
                    f"aggregate = {aggregate / single:.2f}× one",
                    flush=True,
                )
                out["single"], out["aggregate"] = single, aggregate
            results[name] = out
    compare(results, sides[1][0], args.streams)
    if "restart" in parts:
        part_restart(args.model, args, sampling)


if __name__ == "__main__":
    main()
