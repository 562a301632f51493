"""Forced-call grammars per call syntax (issue #18): the family's own call text is accepted, and
only a call of an allowed tool whose arguments fit the schema is."""

from __future__ import annotations

import importlib
from typing import Any

import llguidance
import pytest

from tinytitan.engine.grammar.calls import FORCED_SYNTAXES, answer_prefix, forced_call_grammar
from tinytitan.engine.grammar.schema import lark_literal
from tinytitan.testing.family_outputs import TOOLS as FAMILY_TOOLS

SCHEMA: dict[str, Any] = FAMILY_TOOLS[0]["function"]["parameters"]  # city (string), days (1-7), unit (C|F)
TOOLS = [("get_weather", SCHEMA), ("ping", None)]

# syntax -> (a valid call, (start, end) markers around what mlx-lm's parser reads)
CALLS: dict[str, tuple[str, tuple[str, str]]] = {
    "json_tools": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>',
        ("<tool_call>", "</tool_call>"),
    ),
    "qwen3_coder": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
        ("<tool_call>", "</tool_call>"),
    ),
    "glm47": (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
        "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
        ("<tool_call>", "</tool_call>"),
    ),
    "mistral": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}', ("[TOOL_CALLS]", "")),
    "kimi_k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Paris", "days": 2}<|tool_call_end|><|tool_calls_section_end|>',
        ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    ),
    "gemma4": (
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|>',
        ("<|tool_call>", "<tool_call|>"),
    ),
    "harmony": (
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 2}',
        ("", ""),
    ),
}
# syntax -> texts that must be refused: wrong type, a missing required argument, an unknown tool
BAD: dict[str, list[tuple[str, str]]] = {
    "json_tools": [('"days": 2', '"days": 9'), ('"city": "Paris", ', ""), ("get_weather", "get_news")],
    "qwen3_coder": [("\n2\n", "\nnine\n"), ("<parameter=city>\nParis\n</parameter>\n", ""), ("get_weather", "x")],
    "glm47": [(">2<", ">9<"), ("<arg_key>city</arg_key><arg_value>Paris</arg_value>", ""), ("get_weather", "x")],
    "mistral": [('"days": 2', '"days": "2"'), ('"city": "Paris", ', ""), ("get_weather", "x")],
    "kimi_k2": [('"days": 2', '"days": 0'), ('"city": "Paris", ', ""), ("get_weather", "x")],
    "gemma4": [("days:2", "days:8"), ('city:<|"|>Paris<|"|>,', ""), ("get_weather", "x")],
    "harmony": [('"days": 2', '"days": 2.5'), ('"city": "Paris", ', ""), ("get_weather", "x")],
}
TOKENIZER = llguidance.LLTokenizer("byte")


def accepts(grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(TOKENIZER, grammar)
    return matcher.consume_tokens(TOKENIZER.tokenize_str(text)) and matcher.is_accepting()


def test_every_forceable_syntax_is_covered() -> None:
    assert set(CALLS) == FORCED_SYNTAXES == set(BAD)


@pytest.mark.parametrize("syntax", sorted(CALLS))
def test_the_familys_call_is_accepted_and_parses_back(syntax: str) -> None:
    text, (start, end) = CALLS[syntax]
    grammar = forced_call_grammar(syntax, TOOLS, lark_literal, newlines=False)
    assert accepts(grammar, text)
    if syntax == "harmony":
        return  # openai-harmony reads it: tests/engine/output/test_harmony.py
    body = text[len(start) : len(text) - len(end) if end else None]
    parsed = importlib.import_module(f"mlx_lm.tool_parsers.{syntax}").parse_tool_call(
        body, [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]
    )
    parsed = parsed[0] if isinstance(parsed, list) else parsed  # Kimi's parser lists a section's calls
    assert parsed["name"] == "get_weather" and parsed["arguments"] == {"city": "Paris", "days": 2}


@pytest.mark.parametrize("syntax", sorted(BAD))
def test_a_call_outside_the_schema_is_refused(syntax: str) -> None:
    text, _markers = CALLS[syntax]
    grammar = forced_call_grammar(syntax, TOOLS, lark_literal)
    for old, new in BAD[syntax]:
        assert old in text, (syntax, old)
        assert not accepts(grammar, text.replace(old, new, 1)), (syntax, old, new)


@pytest.mark.parametrize("syntax", ["qwen3_coder", "glm47"])
def test_raw_string_arguments_may_span_lines(syntax: str) -> None:
    text, _ = CALLS[syntax]
    grammar = forced_call_grammar(syntax, TOOLS, lark_literal)
    assert accepts(grammar, text.replace("Paris", "Paris\nFrance"))


def test_glm_45_and_46_put_each_pair_on_a_line() -> None:
    grammar = forced_call_grammar("glm47", TOOLS, lark_literal, newlines=True)
    assert accepts(
        grammar,
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
    )


def test_a_named_tool_without_arguments() -> None:
    grammar = forced_call_grammar("qwen3_coder", [("ping", None)], lark_literal)
    assert accepts(grammar, "<tool_call>\n<function=ping>\n</function>\n</tool_call>")


@pytest.mark.parametrize(
    "syntax, schema, words",
    [
        ("qwen3_coder", {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}, "pattern"),
        ("gemma4", {"type": "object", "properties": {"a": {"type": "object"}}, "required": ["a"]}, "nested"),
    ],
)
def test_what_a_syntax_cannot_promise_is_named(syntax: str, schema: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        forced_call_grammar(syntax, [("f", schema)], lark_literal)


def test_harmony_answers_go_to_the_final_channel() -> None:
    assert answer_prefix("harmony", lark_literal) == '"<|channel|>" "final" "<|message|>"'
    assert answer_prefix("json_tools", lark_literal) is None
