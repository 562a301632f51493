"""Schema compilation with llguidance (reference §6): accepted subset, refusals by name and path."""

from __future__ import annotations

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.grammar.schema import compile_schema, keyword_paths

P = "response_format.json_schema.schema"


def test_supported_schema_compiles() -> None:
    schema = {
        "type": "object",
        "title": "ignored",
        "description": "ignored",
        "x-vendor": {"uniqueItems": True},
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 9},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3},
            "ref": {"$ref": "#/$defs/code"},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["n"],
        "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    }
    assert compile_schema(schema, P)


@pytest.mark.parametrize(
    ("schema", "keyword", "path"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}},
            "uniqueItems",
            "#/properties/a",
        ),
        ({"type": "array", "contains": {"type": "integer"}}, "contains", "#"),
        ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "not", "#/properties/a"),
        ({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}, "if", "#"),
        ({"type": "object", "propertyNames": {"pattern": "^a"}}, "propertyNames", "#"),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, "dependentRequired", "#"),
        ({"anyOf": [{"type": "object"}, {"type": "array", "uniqueItems": True}]}, "uniqueItems", "#/anyOf/1"),
    ],
)
def test_unsupported_keyword_refused_by_name_and_path(schema: dict, keyword: str, path: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        compile_schema(schema, P)
    assert info.value.code == "unsupported_value"
    assert info.value.param == P
    assert info.value.message == f"JSON Schema keyword '{keyword}' at {path} is not supported"


def test_invalid_schema_is_invalid_value() -> None:
    with pytest.raises(InvalidRequest) as info:
        compile_schema({"type": "strange"}, P)
    assert info.value.code == "invalid_value" and "strange" in info.value.message


def test_property_named_like_a_keyword_is_not_a_keyword() -> None:
    schema = {"type": "object", "properties": {"not": {"type": "string"}}}
    assert compile_schema(schema, P)
    assert list(keyword_paths(schema, "not")) == []


# -- grammars for the decoder (issue #6) ------------------------------------------------------------


def test_annotation_named_properties_are_kept() -> None:
    from tinytitan.engine.grammar.schema import clean_schema

    schema = {"type": "object", "title": "t", "properties": {"title": {"type": "string"}, "x-id": {"type": "integer"}}}
    assert clean_schema(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "x-id": {"type": "integer"}},
    }


def test_tool_call_grammar_accepts_only_a_valid_call() -> None:
    import llguidance

    from tinytitan.engine.grammar.calls import forced_call_grammar
    from tinytitan.engine.grammar.schema import lark_literal

    schema = {
        "type": "object",
        "$defs": {"d": {"type": "integer", "minimum": 1, "maximum": 5}},
        "properties": {"a": {"$ref": "#/$defs/d"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    grammar = forced_call_grammar("json_tools", [("f", schema), ("g", None)], lark_literal)
    tok = llguidance.LLTokenizer("byte")

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(tok, grammar)
        return matcher.consume_tokens(tok.tokenize_str(text)) and matcher.is_accepting()

    assert accepts('<tool_call>\n{"name": "f", "arguments": {"a": 3}}\n</tool_call>')
    assert accepts('<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>')
    assert not accepts('<tool_call>\n{"name": "f", "arguments": {"a": 9}}\n</tool_call>')  # $ref bound
    assert not accepts('<tool_call>\n{"name": "h", "arguments": {}}\n</tool_call>')
    assert not accepts('<tool_call>\n{ "name": "g", "arguments": {}}\n</tool_call>')  # compact JSON only


def test_schema_grammar_with_a_closed_thought_prefix() -> None:
    import llguidance

    from tinytitan.engine.grammar.schema import schema_grammar

    grammar = schema_grammar(
        {"type": "object", "properties": {"n": {"enum": [1, 2]}}, "required": ["n"]}, '"</think>" "\\n\\n"'
    )
    tok = llguidance.LLTokenizer("byte")
    matcher = llguidance.LLMatcher(tok, grammar)
    assert matcher.consume_tokens(tok.tokenize_str('</think>\n\n{"n": 2}')) and matcher.is_accepting()
