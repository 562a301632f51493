"""Structured output (reference §6): a client's ``FormatRequest`` checked and compiled once.

Each protocol mapper reads its own spelling (``response_format``, ``text.format``,
``output_config.format``) into a ``FormatRequest`` that says where the client wrote it; this module
is the only place a format is checked, so errors name the client's own fields.
"""

from __future__ import annotations

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, compile_schema
from tinytitan.engine.request import FormatRequest, OutputFormat
from tinytitan.engine.request.limits import check_schema_depth

__all__ = ["parse_output_format"]


def parse_output_format(asked: FormatRequest | None) -> OutputFormat | None:
    """``None`` for plain text; an ``OutputFormat`` (schema compiled to its grammar) for JSON output."""
    if asked is None:
        return None
    if asked.type == "json_object":
        return OutputFormat("json_object", grammar=compile_schema(JSON_OBJECT_SCHEMA, asked.schema_param))
    if asked.type == "json_schema":
        schema = asked.schema
        if not isinstance(schema, dict):
            raise InvalidRequest("json_schema requires json_schema.schema", param=asked.schema_param)
        check_schema_depth(schema, asked.schema_param)  # before the compiler walks it
        grammar = compile_schema(schema, asked.schema_param)
        return OutputFormat("json_schema", schema=schema, name=asked.name, grammar=grammar)
    raise InvalidRequest(
        f"unsupported {asked.param} type '{asked.type}'; use text, json_object or json_schema",
        param=f"{asked.param}.type",
        code="unsupported_value",
    )
