"""The peer benchmark: one workload against TinyTitan and against ``mlx_lm.server``; prints ratios.

    python benchmarks/peer.py [--model DIR] [--only session,streams,restart] [--streams 4]
                              [--url URL --model-name ID] [--peer-url URL] [--tinytitan-arg=--max-concurrent=4 …]

Both servers are started here, one after the other (never at once: they would share the cores), on
the same model directory (default: the Qwen3-0.6B-shape fp32 build of ``tinytitan.testing.tiny_model``)
and with the same BLAS preloaded into both (``tinytitan.cpu_blas.find_blas``: BLIS when installed,
else OpenBLAS; ``TINYTITAN_BLAS=openblas`` for OpenBLAS). ``--url`` / ``--peer-url`` point a
side at a server that is already running instead (any OpenAI-compatible URL).

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

from tinytitan.cpu_blas import find_blas, preload_env
from tinytitan.testing.process import free_port, serve_process

SAMPLING = {
    "default": {"temperature": 0.6, "top_p": 0.95, "top_k": 20},
    "greedy": {"temperature": 0.0},
}
TOOL_NAMES = [
    ("Read", "Read a file from disk.", {"file_path": "string", "offset": "integer", "limit": "integer"}),
    ("Write", "Write a file to the local filesystem, replacing it.", {"file_path": "string", "content": "string"}),
    ("Edit", "Replace an exact string in a file.", {"file_path": "string", "old": "string", "new": "string"}),
    ("Bash", "Run a shell command and return its output.", {"command": "string", "timeout": "integer"}),
    ("Grep", "Search file contents with a regular expression.", {"pattern": "string", "path": "string"}),
    ("Glob", "Find files whose paths match a glob pattern.", {"pattern": "string", "path": "string"}),
    ("LS", "List the entries of a directory.", {"path": "string"}),
    ("WebFetch", "Fetch a URL and return its text.", {"url": "string", "prompt": "string"}),
    ("TodoWrite", "Replace the session's todo list.", {"todos": "array"}),
    ("Task", "Start a sub-agent on a task and return its report.", {"description": "string", "prompt": "string"}),
    ("NotebookEdit", "Edit a cell of a Jupyter notebook.", {"notebook_path": "string", "cell": "integer"}),
    ("MultiEdit", "Apply several edits to one file at once.", {"file_path": "string", "edits": "array"}),
]
RULES = [
    "Read a file before you edit it, and keep edits small and reviewable.",
    "Run the project's tests after every change and report failures exactly as printed.",
    "Never invent file paths: find them with Glob or Grep first.",
    "Prefer the project's existing helpers over new code; match the surrounding style.",
    "Explain a command before running it when it changes files outside the workspace.",
    "Keep answers short: say what changed, where, and how it was checked.",
    "When a tool fails, read its error, fix the cause, and try once more before asking.",
    "Use TodoWrite to plan work of more than three steps and keep the list current.",
]


def tools() -> list[dict[str, Any]]:
    out = []
    for name, description, params in TOOL_NAMES:
        props: dict[str, dict[str, Any]] = {
            p: {"type": t, "description": f"The {p.replace('_', ' ')}."} for p, t in params.items()
        }
        for p, t in params.items():
            if t == "array":
                props[p]["items"] = {"type": "object"}
        schema = {"type": "object", "properties": props, "required": list(params)[:1]}
        out.append({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
    return out


def system_prompt() -> str:
    lines = ["You are a coding agent working in the user's repository. Follow these rules."]
    for section in range(12):
        lines.append(f"\n## Section {section + 1}: working agreement for area {section + 1}")
        lines.extend(f"{section + 1}.{i + 1} {rule}" for i, rule in enumerate(RULES))
    return "\n".join(lines)


def session_turns() -> list[list[dict[str, Any]]]:
    """Three prompts: each turn adds the previous turn's (scripted) call and its result."""
    base: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": "The tests in tests/test_parser.py fail since yesterday. Find out why and fix it."},
    ]
    calls = [
        ("Bash", {"command": "python -m pytest tests/test_parser.py -q"}, "F.F\nFAILED test_parse_empty: KeyError"),
        ("Read", {"file_path": "src/parser.py"}, "def parse(text):\n    return TABLE[text.split()[0]]\n" * 20),
    ]
    turns = [list(base)]
    messages = list(base)
    for i, (name, args, result) in enumerate(calls):
        call_id = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        turns.append(list(messages))
    return turns


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


def show_session(target: Target, wall: float, turns: list[Stream]) -> None:
    parts = ", ".join(
        f"turn {i + 1}: {t.prompt_tokens} prompt ({t.cached_tokens} cached), TTFT {t.ttft:.2f} s, {t.tokens} tokens"
        for i, t in enumerate(turns)
    )
    print(f"  {target.name} session: wall {wall:.2f} s — {parts}", flush=True)


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
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if args.model is None:
        from tinytitan.testing.tiny_model import tiny_model_dir

        args.model = tiny_model_dir("0.6b", "float32")
    sampling = SAMPLING[args.sampling]
    print(f"model {args.model}; sampling {sampling}; BLAS {find_blas()}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    sides = [
        ("TinyTitan", lambda: tinytitan(args.model, list(args.tinytitan_arg), args.url, args.model_name)),
        ("mlx_lm.server", lambda: mlx_lm_server(args.model, args.peer_url)),
    ]
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
    ours, peer = results.get("TinyTitan"), results.get("mlx_lm.server")
    if ours and peer and "wall" in ours:
        print(f"session wall TinyTitan ÷ mlx_lm.server = {ours['wall'] / peer['wall']:.3f}  (target ≤ 0.8)")
        ttfts = [f"{a.ttft / b.ttft:.2f}" for a, b in zip(ours["turns"], peer["turns"], strict=True)]
        print(f"TTFT per turn TinyTitan ÷ mlx_lm.server = {', '.join(ttfts)}")
    if ours and peer and "single" in ours:
        k = args.streams
        print(
            f"{k} streams aggregate ÷ one stream: TinyTitan {ours['aggregate'] / ours['single']:.2f}, "
            f"mlx_lm.server {peer['aggregate'] / peer['single']:.2f}  (target ≥ 2.0 for TinyTitan); "
            f"aggregate TinyTitan ÷ mlx_lm.server = {ours['aggregate'] / peer['aggregate']:.2f}"
        )
    if "restart" in parts:
        part_restart(args.model, args, sampling)


if __name__ == "__main__":
    main()
