"""Wire shapes more than one protocol shares, read once into the neutral request's types.

The sampling fields are spelled alike everywhere (a protocol without one simply lacks it). A
structured-output format object (Chat's ``response_format``, Responses' ``text.format``, Messages'
``output_config.format``) and OpenAI's ``tool_choice`` (Chat and Responses) differ only in where
they sit and how a name is nested; each mapper says that and calls these.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import FormatRequest, Sampling, ToolChoice

__all__ = ["format_request", "openai_tool_choice", "sampling_of"]

_SAMPLING = tuple(f.name for f in fields(Sampling))


def format_request(
    raw: Any, *, param: str, nested: str | None = None, default_name: str | None = None
) -> FormatRequest | None:
    """The format object at ``param`` as a ``FormatRequest``; absent, ``text`` or a non-object value is
    plain text (reference §6). ``nested``: the key of the object holding ``name`` and ``schema`` when it
    is not the format object itself (Chat's ``json_schema``). The validator checks the rest."""
    if not isinstance(raw, dict) or raw.get("type") in (None, "text"):
        return None
    holder = raw.get(nested) if nested else raw
    holder = holder if isinstance(holder, dict) else {}
    name = holder.get("name")
    return FormatRequest(
        type=str(raw["type"]),
        param=param,
        schema_param=f"{param}.{nested}.schema" if nested else f"{param}.schema",
        schema=holder.get("schema"),
        name=name if isinstance(name, str) else default_name,
    )


def openai_tool_choice(choice: Any) -> ToolChoice | None:
    """``auto`` / ``none`` / ``required``, or a function by name: ``{"type": "function", "name"}``
    (Responses) or ``{"type": "function", "function": {"name"}}`` (Chat); other shapes → 400."""
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        return ToolChoice(str(choice))
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        name = (fn.get("name") if isinstance(fn, dict) else None) or choice.get("name")
        return ToolChoice("function", name if isinstance(name, str) else None)
    raise InvalidRequest(
        f"unsupported tool_choice {json.dumps(choice)}; use 'auto', 'none', 'required' or a function by name",
        param="tool_choice",
    )


def sampling_of(wire: object) -> Sampling:
    """The sampling values a wire request sent, by their common names (unchecked: the validator's job)."""
    return Sampling(**{name: getattr(wire, name, None) for name in _SAMPLING})
