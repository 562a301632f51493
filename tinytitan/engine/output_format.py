"""Structured output: the Chat spelling of ``response_format`` parsed once (reference §6).

The Responses (``text.format``) and Messages (``output_config.format``) mappers normalise their
spelling into the Chat one first; this module is the only parser.
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.grammar import JSON_OBJECT_SCHEMA, compile_schema
from tinytitan.engine.limits import check_schema_depth
from tinytitan.engine.request import OutputFormat

__all__ = ["parse_output_format"]


def parse_output_format(raw: Any, param: str = "response_format") -> OutputFormat | None:
    """``None`` for plain text; an ``OutputFormat`` (schema compiled to its grammar) for JSON output.

    ``param`` is where the client's protocol put the format: the Chat spelling nests the schema
    under ``json_schema.schema``; Responses' ``text.format`` and Messages' ``output_config.format``
    hold it as ``schema`` (their mappers normalise into the Chat shape, errors name theirs).
    """
    if not isinstance(raw, dict):
        return None  # absent, or an unrecognised non-object: plain text
    kind = raw.get("type")
    if kind in (None, "text"):
        return None
    schema_param = f"{param}.json_schema.schema" if param == "response_format" else f"{param}.schema"
    if kind == "json_object":
        return OutputFormat("json_object", grammar=compile_schema(JSON_OBJECT_SCHEMA, schema_param))
    if kind == "json_schema":
        spec = raw.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise InvalidRequest("json_schema requires json_schema.schema", param=schema_param)
        check_schema_depth(schema, schema_param)  # before the compiler walks it
        name = spec.get("name") if isinstance(spec.get("name"), str) else None
        return OutputFormat("json_schema", schema=schema, name=name, grammar=compile_schema(schema, schema_param))
    raise InvalidRequest(
        f"unsupported {param} type '{kind}'; use text, json_object or json_schema",
        param=f"{param}.type",
        code="unsupported_value",
    )
