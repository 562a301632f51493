"""Forced calls of every family through the mlx backend, on both kinds of tokenizer (issue 28.3).

A family's own tokenizer carries its markers as special tokens; its ``@text`` variant
(``family_dir(name, text_markers=True)``) spells them as plain text, as a generic tokenizer serving
that template does. The layout each family's forced call is written in is pinned here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tinytitan.api.offline import to_chat_request
from tinytitan.engine.events import Finished, TextDelta, ToolCall
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.output.parser import ParseOptions
from tinytitan.engine.request import ValidatedRequest
from tinytitan.engine.service import Engine
from tinytitan.testing.families import FAMILIES
from tinytitan.testing.loop import run

from .test_families import FACTS, collect, validated

# the layout each family's forced call emits
_ARGS = '{{"path": "{path}", "content": "{content}"}}'
FORCED_LAYOUT: dict[str, str] = {
    "qwen3": '<tool_call>\n{{"name": "read_file", "arguments": ' + _ARGS + "}}\n</tool_call>",
    "qwen3-coder": "<tool_call>\n<function=read_file>\n<parameter=path>\n{path}\n</parameter>\n"
    "<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>",
    "glm-4.6": "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>{path}</arg_value>\n"
    "<arg_key>content</arg_key>\n<arg_value>{content}</arg_value>\n</tool_call>",  # a pair per line
    "glm-4.7": "<tool_call>read_file<arg_key>path</arg_key><arg_value>{path}</arg_value>"
    "<arg_key>content</arg_key><arg_value>{content}</arg_value></tool_call>",
    "mistral": "[TOOL_CALLS]read_file[ARGS]" + _ARGS,
    "devstral": "[TOOL_CALLS]read_file[ARGS]" + _ARGS,
    "gemma-4": '<|tool_call>call:read_file{{path:<|"|>{path}<|"|>,content:<|"|>{content}<|"|>}}<tool_call|>',
    "gpt-oss": "<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>" + _ARGS,
    "kimi-k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>"
    + _ARGS
    + "<|tool_call_end|><|tool_calls_section_end|>",
}
FORCED_LAYOUT["kimi-k2-thinking"] = FORCED_LAYOUT["kimi-k2"]
# gpt-oss's harmony is read from its token ids: its markers are special tokens by construction
FORCED_VARIANTS = [n for n in FAMILIES if FACTS[n][2]] + [
    f"{n}@text" for n in FAMILIES if FACTS[n][2] and n != "gpt-oss"
]


def _read_file(path: dict[str, Any], content: dict[str, Any]) -> list[dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"path": path, "content": content},
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    return [{"type": "function", "function": {"name": "read_file", "parameters": schema}}]


def _forced(backend: MlxBackend, tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Read it."}], "tools": tools, "tool_choice": "required", **extra}


def _head(backend: MlxBackend, request: ValidatedRequest) -> str:
    """What the grammar puts before the call: the close of a thought the template opened."""
    think_end = backend.tokenizer.think_end
    return f"{think_end}\n\n" if backend.render(request).start_in_reasoning and think_end else ""


@pytest.mark.parametrize("variant", FORCED_VARIANTS)
def test_a_forced_call_with_free_text_arguments_fits_its_grammar_on_both_tokenizers(
    backends: dict[str, MlxBackend], variant: str
) -> None:
    """The family's own call, tokenized by the served tokenizer, is what the forced-call grammar accepts;
    a plain-text end marker used to be a hidden ``stop`` the tokens could not write (GLM's ``>\\n``)."""
    import llguidance

    from tinytitan.engine.models.grammar import grammar_for

    name = variant.partition("@")[0]
    backend = backends[variant]
    free = {"type": "string"}
    request = validated(backend, _forced(backend, _read_file(free, free)))
    layouts = {FORCED_LAYOUT[name]} | ({FORCED_LAYOUT["glm-4.6"], FORCED_LAYOUT["glm-4.7"]} if "glm" in name else set())
    newlines = "\n<arg_key>" in FORCED_LAYOUT[name]
    grammar = grammar_for(
        request,
        backend.render(request),
        backend.lltokenizer,
        backend.tokenizer,
        syntax=backend.syntax,
        newlines=newlines,
    )
    assert grammar is not None
    for layout in layouts:  # the family's layout is accepted; GLM's other one is not
        text = _head(backend, request) + layout.format(path="src/app.py", content="print(1)")
        matcher = llguidance.LLMatcher(backend.lltokenizer, grammar)
        tokens = backend.tokenizer.encode(text, add_special_tokens=False)
        accepted = all(matcher.consume_token(t) for t in tokens) and matcher.is_accepting()
        assert accepted == (layout == FORCED_LAYOUT[name]), (layout, matcher.get_error())


@pytest.mark.parametrize("variant", FORCED_VARIANTS)
def test_a_forced_call_from_the_random_model_emits_its_familys_layout(
    backends: dict[str, MlxBackend], variant: str
) -> None:
    name = variant.partition("@")[0]
    backend = backends[variant]
    tools = _read_file({"type": "string", "enum": ["a.txt", "b.txt"]}, {"type": "string", "enum": ["hi", "yo"]})
    raw: list[str] = []
    parser_of = backend.output_parser

    def recording(options: ParseOptions) -> Any:
        parser = parser_of(options)
        feed = parser.feed

        def record(piece: str, tokens: int = 1) -> list[Any]:
            raw.append(piece)
            return feed(piece, tokens)

        parser.feed = record  # type: ignore[method-assign]
        return parser

    engine = Engine(backend)
    try:
        backend.output_parser = recording  # type: ignore[method-assign]
        body = _forced(backend, tools, max_tokens=200, seed=5, temperature=1.0)
        events = run(collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
    finally:
        del backend.output_parser
        engine.shutdown()
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    args = json.loads(call.arguments)
    assert call.name == "read_file" and sorted(args) == ["content", "path"], events
    head = _head(backend, validated(backend, body))
    assert "".join(raw).strip() == (head + FORCED_LAYOUT[name].format(**args)).strip()
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


def test_a_forced_call_the_cap_cuts_is_never_a_call_without_its_arguments(backends: dict[str, MlxBackend]) -> None:
    """The audit's case: GLM-4.6 on a tokenizer spelling its markers as text, two free-text arguments
    required, and the random model still writing the first when the cap comes: `length`, the text as
    written — not ``read_file({})``."""
    backend = backends["glm-4.6@text"]
    free = {"type": "string"}
    engine = Engine(backend)
    try:
        body = _forced(backend, _read_file(free, free), max_tokens=24, seed=0, temperature=1.0)
        events = run(collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
    finally:
        engine.shutdown()
    assert not [e for e in events if isinstance(e, ToolCall)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>")
    assert isinstance(events[-1], Finished) and events[-1].reason == "length"
