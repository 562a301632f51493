"""Tool search: what 100 deferred MCP tools cost the prompt, against the same tools sent plainly (issue 39).

    python benchmarks/bench_tool_search.py [--tools 100] [--rounds 1] [--shape 0.6b]

Over Anthropic Messages against an in-process server on the Qwen3-0.6B-shape model (Qwen's real
tokenizer and tool syntax, random weights — the embedded SmolLM2 has no tool-call syntax, so no tool
reaches its prompt either way): the prompt tokens and the first turn's time to first token (a one-token
answer, the prompt cache emptied before each) with

- no tools (the baseline),
- the test MCP server's tools sent plainly,
- the same tools with ``defer_loading: true`` beside ``tool_search_tool_regex``,

the share of the tools' prompt tokens the deferral saves (target ≥ 90 %), and the prompt cache on the
turn after a search revealed a tool (the client sends back the ``server_tool_use`` and
``tool_search_tool_result`` blocks; the revealed definition goes into the tool result, so the prefix the
first turn left in the cache still serves). Not part of the test run; on a busy machine the times are
noise — the token figures are exact.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.cpu_blas import ensure_openblas

ensure_openblas()  # before mlx is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from tinytitan.engine.models.mlx import MlxBackend  # noqa: E402
from tinytitan.testing.mcp_server import NEEDLE, tool_definitions  # noqa: E402
from tinytitan.testing.server import LiveServer, live_server  # noqa: E402
from tinytitan.testing.tiny_model import tiny_model_dir  # noqa: E402

SEARCH = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
QUESTION = "What will the weather be in Paris tomorrow?"


def _tools(n: int) -> list[dict[str, Any]]:
    every = tool_definitions()
    chosen = [t for t in every if t["name"] == NEEDLE] + [t for t in every if t["name"] != NEEDLE]
    return chosen[:n]


def _ask(live: LiveServer, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "messages": messages}
    if tools:
        body["tools"] = tools
    response = httpx.post(live.url + "/v1/messages", json=body, timeout=3600)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


def _prompt_tokens(answer: dict[str, Any]) -> int:
    usage = answer["usage"]
    return int(usage["input_tokens"]) + int(usage.get("cache_read_input_tokens") or 0)


def first_turn(
    live: LiveServer, backend: MlxBackend, model: str, tools: list[dict[str, Any]], rounds: int
) -> tuple[int, float]:
    """The prompt's tokens and the median time to a one-token answer, from an empty prompt cache."""
    times: list[float] = []
    tokens = 0
    for _ in range(rounds):
        backend.prompt_cache.clear()
        start = time.perf_counter()
        answer = _ask(live, model, [{"role": "user", "content": QUESTION}], tools)
        times.append(time.perf_counter() - start)
        tokens = _prompt_tokens(answer)
    return tokens, statistics.median(times)


def after_a_search(
    live: LiveServer, backend: MlxBackend, model: str, tools: list[dict[str, Any]]
) -> tuple[int, int, int]:
    """Turn 1 (deferred tools), then turn 2 carrying the search that revealed ``NEEDLE``: turn 1's
    prompt tokens, turn 2's, and how many of turn 2's the prompt cache served."""
    backend.prompt_cache.clear()
    first = _ask(live, model, [{"role": "user", "content": QUESTION}], tools)
    found = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": NEEDLE}],
    }
    history: list[dict[str, Any]] = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": SEARCH["name"],
                    "input": {"pattern": "forecast"},
                },
                {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": found},
            ],
        },
        {"role": "user", "content": "Go on."},
    ]
    second = _ask(live, model, history, tools)
    return _prompt_tokens(first), _prompt_tokens(second), int(second["usage"].get("cache_read_input_tokens") or 0)


def _count(live: LiveServer, model: str, tools: list[dict[str, Any]]) -> int:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": QUESTION}]}
    if tools:
        body["tools"] = tools
    response = httpx.post(live.url + "/v1/messages/count_tokens", json=body, timeout=600)
    response.raise_for_status()
    return int(response.json()["input_tokens"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--shape", default="0.6b")
    args = ap.parse_args()
    backend = MlxBackend(str(tiny_model_dir(shape=args.shape)), drafts=False)
    plain = _tools(args.tools)
    deferred: list[dict[str, Any]] = [SEARCH, *({**t, "defer_loading": True} for t in plain)]
    say = print
    with live_server(backend) as live:
        model = live.engine.model_ids()[0]
        say(f"{args.tools} tools on the {args.shape} Qwen3-shape model (Qwen tokenizer), Anthropic Messages:")
        # the prompt tokens first (count_tokens: what the model sees, exact), then the timed runs
        none_tokens, plain_tokens = _count(live, model, []), _count(live, model, plain)
        deferred_tokens = _count(live, model, deferred)
        saved = 1 - (deferred_tokens - none_tokens) / (plain_tokens - none_tokens)
        say(f"  prompt tokens: no tools {none_tokens}, sent plainly {plain_tokens}, deferred + regex {deferred_tokens}")
        from_tools = f"{plain_tokens - none_tokens} plainly, {deferred_tokens - none_tokens} deferred"
        say(f"  prompt tokens from tools: {from_tools}: {100 * saved:.1f} % fewer (target >= 90 %)", flush=True)
        _ask(live, model, [{"role": "user", "content": "hi"}], [])  # load and warm up
        turn1, turn2, cached = after_a_search(live, backend, model, deferred)
        say(
            f"  turn 2 after a search revealed {NEEDLE}: {turn2} prompt tokens, {cached} from the prompt cache "
            f"(turn 1's prompt: {turn1}; {100 * cached / turn1:.0f} % of it reused)",
            flush=True,
        )
        for name, tools in (("no tools", []), ("deferred + regex", deferred), ("sent plainly", plain)):
            tokens, seconds = first_turn(live, backend, model, tools, args.rounds)
            say(f"  first turn, {name}: {tokens} prompt tokens, first token in {seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main()
