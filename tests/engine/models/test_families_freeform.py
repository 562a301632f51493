"""Custom (freeform) tools on the model families' own call syntaxes (issue 38 item 3).

Every family with a call syntax carries a custom tool's input as the one string argument ``input``:
its template renders a past call and its parser reads the input back exactly — newlines, quotes,
backslashes, braces, a whole ``*** Begin Patch`` block. And every input a tiny random model writes
under a grammar — Codex's real ``apply_patch`` grammar, a JavaScript-ish one — parses under it, when
``tool_choice`` forces the call and when the model chooses it (property test over seeds; the model is
steered toward short structure, ``steering.py``, which the grammar mask still overrules).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from tinytitan.api.offline import to_chat_request
from tinytitan.engine.events import Finished, ToolCall
from tinytitan.engine.grammar.freeform import accepts, compile_input
from tinytitan.engine.grammar.trigger import TriggeredMask
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.output.parser import ParseOptions
from tinytitan.engine.request.validate import validate
from tinytitan.engine.service import Engine
from tinytitan.testing.families import FAMILIES
from tinytitan.testing.freeform import PATCH, custom_tool, grammar
from tinytitan.testing.loop import run

from .steering import steer
from .test_families import FACTS

VARIANTS = [n for n in FAMILIES if FACTS[n][0]] + [f"{n}@text" for n in FAMILIES if FACTS[n][0] and n != "gpt-oss"]
INPUTS = {
    "patch": PATCH,
    "code": 'function f(a) {\n  return "}" + a.replace(/\\\\/g, "\\\\\\\\");\n}\n\n',
    "edges": '\n  leading and trailing whitespace, a "quote", a \\ backslash, null\t\n',
}


def _conversation(backend: MlxBackend, text: str) -> Any:
    tool = custom_tool("apply_patch", chat=True)
    call = {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": text}}
    body = {
        "messages": [
            {"role": "user", "content": "patch it"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ],
        "tools": [tool],
    }
    return validate(to_chat_request(body, "chat", model=backend.info.id), backend.info)


def _written_call(backend: MlxBackend, prompt: str) -> str:
    """The call as the template wrote it, from its start (what the model writes when it calls)."""
    if backend.syntax == "harmony":  # the template writes the recipient in the header: <|start|>assistant to=…
        return prompt[prompt.index("<|start|>assistant to=functions.apply_patch") + len("<|start|>assistant") :]
    marker = {"mistral": "[TOOL_CALLS]apply_patch"}.get(backend.syntax or "", backend.tokenizer.tool_call_start)
    return prompt[prompt.index(marker, prompt.index("patch it")) :]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_custom_call_renders_and_parses_back_losslessly(backends: dict[str, MlxBackend], variant: str) -> None:
    backend = backends[variant]
    for name, text in INPUTS.items():
        request = _conversation(backend, text)
        prompt = backend.render(request).text
        parser = backend.output_parser(ParseOptions(tools=request.tools))
        events = parser.feed(_written_call(backend, prompt)) + parser.finish()
        calls = [e for e in events if isinstance(e, ToolCall)]
        assert calls and (calls[0].type, calls[0].name) == ("custom", "apply_patch"), (name, events[:3])
        assert calls[0].arguments == text, name


def test_the_template_sees_one_string_argument_with_its_grammar(backends: dict[str, MlxBackend]) -> None:
    backend = backends["qwen3-coder"]
    body = {"messages": [{"role": "user", "content": "hi"}]}
    body["tools"] = [custom_tool("apply_patch", grammar("codex_apply_patch"), chat=True)]
    prompt = backend.render(validate(to_chat_request(body, "chat", model=backend.info.id), backend.info)).text
    assert "<name>apply_patch</name>" in prompt and "<parameter>\n<name>input</name>\n<type>string</type>" in prompt
    assert "*** Begin Patch" in prompt  # the grammar, in the argument's description


# -- the property: every input a random model writes under a grammar parses under it -------------------

CASES = [
    (family, source, mode)
    for family in ("qwen3", "qwen3-coder", "glm-4.7", "gpt-oss")
    for source in ("codex_apply_patch", "js_exec")
    for mode in ("forced", "chosen")
]
SEEDS = 4


async def _generate(engine: Engine, body: dict[str, Any]) -> list[Any]:
    job = await engine.prepare(to_chat_request(body, "chat", model=engine.info.id))
    return [event async for event in job.events()]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("family", "source", "mode"), CASES)
def test_every_input_a_random_model_writes_under_a_grammar_parses(family: str, source: str, mode: str) -> None:
    from tinytitan.testing.families import family_dir

    definition = grammar(source)
    compiled = compile_input("lark", definition)
    backend = MlxBackend(str(family_dir(family)), max_concurrent=SEEDS, drafts=False)
    masks = steer(backend, chosen="apply_patch" if mode == "chosen" else None)
    engine = Engine(backend)
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Edit the file."}],
        "tools": [custom_tool("apply_patch", definition, chat=True), {"type": "function", "function": {"name": "ls"}}],
        "tool_choice": {"type": "custom", "custom": {"name": "apply_patch"}} if mode == "forced" else "auto",
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 160,
        "temperature": 1.0,
    }

    async def all_seeds() -> list[list[Any]]:
        return await asyncio.gather(*(_generate(engine, {**body, "seed": seed}) for seed in range(SEEDS)))

    try:
        results = run(all_seeds())
    finally:
        engine.shutdown()
    inputs = []
    for events in results:
        calls = [e for e in events if isinstance(e, ToolCall)]
        assert isinstance(events[-1], Finished)
        for call in calls:  # a call reaches the client only when its input parses
            assert call.type == "custom" and call.name == "apply_patch"
            assert accepts(compiled.grammar, call.arguments), call.arguments  # the client's grammar itself
            assert re.fullmatch(compiled.regex, call.arguments), call.arguments  # and Python's re on its regex
            inputs.append(call.arguments)
    assert inputs, f"no call finished within the cap: {results}"
    if mode == "chosen":  # the calls were held to the grammar by the triggered mask, not merely checked
        assert all(isinstance(m, TriggeredMask) for m in masks)
        assert sum(m.calls for m in masks) >= len(inputs)
