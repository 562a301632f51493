"""Tool search on a tiny family model (issue 39): Qwen3's real template, tokenizer and call parser.

``ScriptedMlxBackend`` makes the random model write a call to the search tool until the needle is
revealed, then the needle's call — so the search call is read by the family's own parser, the found
definition reaches the model through its own template, and the turn sent back hits the prompt cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import ValidatedRequest
from tinytitan.testing.device import on_device
from tinytitan.testing.families import family_dir
from tinytitan.testing.mcp_server import NEEDLE, tool_definitions
from tinytitan.testing.scripted_mlx import ScriptedMlxBackend
from tinytitan.testing.server import LiveServer, live_server

REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
DESCRIPTION = "Get the weather forecast for a city"
ANSWER = "It is sunny in Paris."


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call>'


class Searching(ScriptedMlxBackend):
    """Searches until the needle is revealed, then calls it, then answers; keeps every prompt."""

    prompts: list[str]

    def _grammar_mask(self, request: ValidatedRequest, prompt: Prompt) -> Any:
        self.prompts.append(prompt.text)
        last = request.turns[-1]
        if last.role == "tool" and last.name == NEEDLE:
            self.script = ANSWER
        elif NEEDLE in {t.name for t in request.revealed}:
            self.script = _call(NEEDLE, {"city": "Paris"})
        else:
            self.script = _call("tool_search_tool_regex", {"pattern": "weather forecast for a city"})
        return super()._grammar_mask(request, prompt)


@pytest.fixture(scope="module")
def backend() -> Iterator[Searching]:
    searching = Searching(str(family_dir("qwen3")))
    searching.prompts = []
    yield searching
    on_device(searching.unload)


@pytest.fixture(scope="module")
def live(backend: Searching) -> Iterator[LiveServer]:
    with live_server(backend) as server:
        yield server


def _messages(live: LiveServer, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {
        "model": live.engine.info.id,
        "max_tokens": 512,
        "temperature": 0,
        "messages": messages,
        "tools": [REGEX, *({**t, "defer_loading": True} for t in tool_definitions())],
    }
    response = httpx.post(live.url + "/v1/messages", json=body, timeout=600)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_the_family_searches_finds_and_calls_and_the_next_turn_hits_the_cache(
    live: LiveServer, backend: Searching
) -> None:
    backend.prompts.clear()
    question = {"role": "user", "content": "What is the weather in Paris?"}
    answer = _messages(live, [question])
    use, result, call = answer["content"]
    assert (use["type"], use["name"], use["input"]) == (
        "server_tool_use",
        "tool_search_tool_regex",
        {"pattern": "weather forecast for a city"},
    )
    assert result["type"] == "tool_search_tool_result"
    assert [r["tool_name"] for r in result["content"]["tool_references"]] == [NEEDLE]
    assert (call["type"], call["name"], call["input"]) == ("tool_use", NEEDLE, {"city": "Paris"})
    assert answer["stop_reason"] == "tool_use"
    # round 1 saw none of the 105 tools; round 2 read the needle's definition in the search result,
    # after a prompt that begins with round 1's (the tool list unchanged)
    first, second = backend.prompts
    assert NEEDLE not in first and DESCRIPTION not in first and "tool_search_tool_regex" in first
    assert DESCRIPTION in second and second.startswith(first)

    # turn 2: the client sends the answer back with the tool's result
    history = [
        question,
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "Sunny, 21 C"}]},
    ]
    again = _messages(live, history)
    assert [b["text"] for b in again["content"] if b["type"] == "text"] == [ANSWER]
    usage = again["usage"]
    # the revealed tool stayed in the search result: the prompt of the first turn's last round serves
    assert backend.prompts[-1].startswith(second)
    assert usage["cache_read_input_tokens"] >= 0.9 * (usage["cache_read_input_tokens"] + usage["input_tokens"])
