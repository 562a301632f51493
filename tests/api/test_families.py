"""Each model family's own output, end to end on all three protocols (issue #18).

The server runs the family's tiny model directory on the real mlx backend (its real template,
tokenizer, markers and tool parser — or openai-harmony for gpt-oss); ``ScriptedMlxBackend`` masks
the random model so it writes exactly the family's sample output (tinytitan.testing.family_outputs).
Each protocol must then show the reasoning, the text and the calls, read through the official SDKs
(Chat and Messages streamed and accumulated by the SDKs' stream helpers, Responses whole).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anthropic
import openai
import pytest

from tinytitan.testing.device import on_device
from tinytitan.testing.families import FAMILIES, family_dir
from tinytitan.testing.family_outputs import OUTPUTS, TOOLS, Expected
from tinytitan.testing.scripted_mlx import ScriptedMlxBackend
from tinytitan.testing.server import LiveServer, live_server

PROTOCOLS = {"chat": True, "responses": False, "messages": True}  # protocol -> streamed
# per family: reasoning, text and a call (Llama 3, served without tools: reasoning-free text); several
# calls in one answer go through the same parser and encoders (tests/engine/models/test_families.py)
CASES = [(f, "call" if "call" in OUTPUTS[f] else "answer", p) for f in FAMILIES for p in PROTOCOLS]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, LiveServer]]:
    """One family's server at a time (the cases run family by family): eleven loaded tokenizers and
    grammars held together took over 5 GB."""
    current = ExitStack()

    class Servers(dict[str, LiveServer]):
        def __missing__(self, name: str) -> LiveServer:
            current.close()
            self.clear()
            backend = ScriptedMlxBackend(str(family_dir(name)))
            current.callback(on_device, backend.unload)
            self[name] = current.enter_context(live_server(backend))
            return self[name]

    with current:
        yield Servers()


def ask(server: LiveServer, protocol: str, stream: bool) -> Expected:
    model = server.engine.info.id
    question = "Weather in Paris?"
    if protocol == "chat":
        client = openai.OpenAI(base_url=server.v1, api_key="x", max_retries=0)
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "tools": TOOLS,
            "max_tokens": 1024,
            "temperature": 0,  # greedy: the script decides the text, sampling would only cost time
        }
        if stream:
            with client.chat.completions.stream(**body) as events:
                message = events.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(**body).choices[0].message
        extra = message.model_extra or {}
        calls = tuple((c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ())
        return _expected(extra.get("reasoning_content"), message.content, calls)
    if protocol == "responses":
        client = openai.OpenAI(base_url=server.v1, api_key="x", max_retries=0)
        tools = [{"type": "function", **t["function"]} for t in TOOLS]
        rbody: dict[str, Any] = {
            "model": model,
            "input": question,
            "tools": tools,
            "max_output_tokens": 1024,
            "temperature": 0,
        }
        if stream:
            with client.responses.stream(**rbody) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(**rbody)
        reasoning = "".join(s.text for item in response.output if item.type == "reasoning" for s in item.summary)
        text = "".join(
            c.text
            for item in response.output
            if item.type == "message"
            for c in item.content
            if c.type == "output_text"
        )
        calls = tuple((i.name, json.loads(i.arguments)) for i in response.output if i.type == "function_call")
        return _expected(reasoning, text, calls)
    aclient = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    atools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS]
    abody: dict[str, Any] = {
        "model": model,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": question}],
        "tools": atools,
        "extra_body": {"temperature": 0},  # this SDK's stream() does not name it
    }
    if stream:
        with aclient.messages.stream(**abody) as events:
            reply = events.get_final_message()
    else:
        reply = aclient.messages.create(**abody)
    reasoning = "".join(b.thinking for b in reply.content if b.type == "thinking")
    text = "".join(b.text for b in reply.content if b.type == "text")
    calls = tuple((b.name, b.input) for b in reply.content if b.type == "tool_use")
    return _expected(reasoning, text, calls)


def _expected(reasoning: str | None, text: str | None, calls: tuple[Any, ...]) -> Expected:
    return Expected((reasoning or "").strip() or None, (text or "").strip() or None, calls)


@pytest.mark.parametrize("name, scenario, protocol", CASES)
def test_the_familys_output_on_every_protocol(
    servers: dict[str, LiveServer], name: str, scenario: str, protocol: str
) -> None:
    server = servers[name]
    backend = server.engine.backend
    assert isinstance(backend, ScriptedMlxBackend)
    output = OUTPUTS[name][scenario]
    backend.script = output.raw
    try:
        assert ask(server, protocol, PROTOCOLS[protocol]) == output.expected
    finally:
        backend.script = None
