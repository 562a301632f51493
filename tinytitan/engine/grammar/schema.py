"""Structured-output grammars (reference §6): JSON schemas compiled by llguidance.

``compile_schema`` runs during validation, so a schema the engine cannot promise is a 400 before
any model work: every keyword llguidance does not implement is refused by name with its JSON path.
The compiled grammar string is what a decoder hands to ``llguidance.LLMatcher`` to mask logits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from tinytitan.engine.errors import InvalidRequest

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions  # a TypedDict of its stubs only (nothing at run time)

__all__ = [
    "ANNOTATIONS",
    "DEFAULT_TOOL_SCHEMA",
    "JSON_OBJECT_SCHEMA",
    "clean_schema",
    "compile_lark",
    "compile_schema",
    "keyword_paths",
    "lark_literal",
    "rebase_refs",
    "schema_grammar",
]

JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
# compact JSON: no free whitespace, so a document cannot stall in indentation (random weights do)
JSON_OPTIONS: JsonCompileOptions = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
DEFAULT_TOOL_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "$schema",
        "$id",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_UNIMPLEMENTED = re.compile(r"Unimplemented keys: \[(.*)\]")
# keywords whose value is a map of name -> subschema, or a list / single subschema
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


def clean_schema(schema: Any) -> Any:
    """``schema`` without annotations: what the engine is handed."""
    return _strip_annotations(schema)


def _strip_annotations(schema: Any) -> Any:
    """Annotations (and ``x-*`` extensions) are ignored, whatever the engine thinks of them.

    Only keywords are stripped: a property (or ``$defs`` entry) named ``title`` or ``x-id`` stays.
    """
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k in ANNOTATIONS or k.startswith("x-"):
                continue
            if k in ("enum", "const"):
                out[k] = v
            elif k in _SCHEMA_MAPS and isinstance(v, dict):
                out[k] = {name: _strip_annotations(sub) for name, sub in v.items()}
            else:
                out[k] = _strip_annotations(v)
        return out
    if isinstance(schema, list):
        return [_strip_annotations(v) for v in schema]
    return schema


def keyword_paths(schema: Any, keyword: str, path: str = "#") -> Iterator[str]:
    """JSON pointers of the (sub)schemas that use ``keyword`` as a keyword (not as a property name)."""
    if not isinstance(schema, dict):
        return
    if keyword in schema:
        yield path
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from keyword_paths(sub, keyword, f"{path}/{key}/{name}")
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from keyword_paths(sub, keyword, f"{path}/{key}/{i}")
        elif key in _SCHEMA_ONE:
            if isinstance(value, list):  # legacy tuple items
                for i, sub in enumerate(value):
                    yield from keyword_paths(sub, keyword, f"{path}/{key}/{i}")
            else:
                yield from keyword_paths(value, keyword, f"{path}/{key}")


@lru_cache(maxsize=128)
def _compile(schema_json: str) -> tuple[str | None, str | None]:
    import llguidance  # lazy: not needed to start the CLI

    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema_json, overrides=JSON_OPTIONS)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        return None, messages[0] if messages else "invalid schema"
    return grammar, None


def compile_schema(schema: dict[str, Any], param: str) -> str:
    """The llguidance grammar for ``schema``; ``InvalidRequest`` naming what cannot be promised."""
    cleaned = _strip_annotations(schema)
    try:
        grammar, error = _compile(json.dumps(cleaned, sort_keys=True))
    except ValueError as exc:
        raise InvalidRequest(f"invalid JSON schema: {exc}", param=param) from exc
    if grammar is not None:
        return grammar
    assert error is not None
    match = _UNIMPLEMENTED.search(error)
    if match:
        keyword = json.loads(f"[{match.group(1)}]")[0]
        where = next(keyword_paths(cleaned, keyword), "#")
        raise InvalidRequest(
            f"JSON Schema keyword '{keyword}' at {where} is not supported",
            param=param,
            code="unsupported_value",
        )
    raise InvalidRequest(f"invalid JSON schema: {error}", param=param)


# -- grammars the decoder masks with -------------------------------------------------------------
# A marker (``<tool_call>``, ``</think>``) is a Lark expression: a quoted literal, or ``<[id]>`` when
# the tokenizer holds it as one special token (llguidance never matches those from plain bytes).


def lark_literal(text: str) -> str:
    """``text`` as a Lark string literal."""
    return json.dumps(text)


def rebase_refs(schema: Any, base: str) -> Any:
    """Local ``$ref``s re-rooted under ``base`` (the schema is embedded in a larger one)."""
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = base + v[1:]
            elif k in ("enum", "const"):
                out[k] = v
            else:
                out[k] = rebase_refs(v, base)
        return out
    if isinstance(schema, list):
        return [rebase_refs(v, base) for v in schema]
    return schema


@lru_cache(maxsize=128)
def compile_lark(lark: str) -> str:
    """The llguidance grammar for a Lark source; ``ValueError`` when llguidance rejects it."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_lark(lark)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    if is_error:
        raise ValueError(messages[0] if messages else "invalid grammar")
    return grammar


def schema_grammar(schema: dict[str, Any], prefix: str | None = None) -> str:
    """A JSON document matching ``schema``, after the Lark expression ``prefix`` (e.g. a closed thought)."""
    body = json.dumps({**clean_schema(schema), "x-guidance": JSON_OPTIONS}, sort_keys=True)
    head = f"{prefix} " if prefix else ""
    return compile_lark(f"start: {head}doc\ndoc: %json {body}\n")
