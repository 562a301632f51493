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
from tinytitan.engine.request import FormatRequest, Freeform, Sampling, ToolChoice

__all__ = ["custom_format", "format_request", "openai_tool_choice", "sampling_of"]

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


def custom_format(raw: Any, *, param: str) -> Freeform:
    """A custom tool's ``format``: absent or ``{"type": "text"}``, or a grammar — ``{"type": "grammar",
    "syntax", "definition"}`` (Responses) or ``{"type": "grammar", "grammar": {"syntax", "definition"}}``
    (Chat). The validator compiles it."""
    if raw is None:
        return Freeform()
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise InvalidRequest("a custom tool's format must be an object with a 'type'", param=param)
    nested = raw.get("grammar")
    holder: dict[str, Any] = nested if isinstance(nested, dict) else raw
    syntax, definition = holder.get("syntax"), holder.get("definition")
    return Freeform(
        raw["type"],
        syntax if isinstance(syntax, str) else None,
        definition if isinstance(definition, str) else None,
    )


def _named(entry: Any) -> str | None:
    """The tool an OpenAI tool-choice entry names: ``{"type", "name"}`` (Responses) or
    ``{"type": T, T: {"name"}}`` (Chat), for ``T`` ``function`` or ``custom``."""
    if not isinstance(entry, dict):
        return None
    inner = entry.get(str(entry.get("type")))
    name = (inner.get("name") if isinstance(inner, dict) else None) or entry.get("name")
    return name if isinstance(name, str) else None


def _allowed(choice: dict[str, Any]) -> ToolChoice:
    """``{"type": "allowed_tools", "mode", "tools"}`` (Responses) or the same under ``allowed_tools`` (Chat)."""
    nested = isinstance(choice.get("allowed_tools"), dict)
    body: dict[str, Any] = choice["allowed_tools"] if nested else choice
    param = "tool_choice.allowed_tools" if nested else "tool_choice"
    mode = body.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise InvalidRequest("allowed_tools mode must be 'auto' or 'required'", param=f"{param}.mode")
    entries = body.get("tools")
    if not isinstance(entries, list) or not entries:
        raise InvalidRequest("allowed_tools needs a non-empty 'tools' list", param=f"{param}.tools")
    names: list[str] = []
    for j, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("type") not in ("function", "custom"):
            continue  # a hosted tool: left out of the prompt like the tool itself
        name = _named(entry)
        if name is None:
            raise InvalidRequest("an allowed tool needs its type and name", param=f"{param}.tools[{j}]")
        names.append(name)
    return ToolChoice(str(mode), param=param, allowed=tuple(names))


def openai_tool_choice(choice: Any) -> ToolChoice | None:
    """``auto`` / ``none`` / ``required``, a function or a custom tool by name (``{"type": "function" |
    "custom", "name"}`` in Responses, ``{"type": T, T: {"name"}}`` in Chat), or ``allowed_tools``;
    other shapes → 400."""
    if choice is None:
        return None
    if choice in ("auto", "none", "required"):
        return ToolChoice(str(choice))
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        return ToolChoice("function", _named(choice))
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return _allowed(choice)
    raise InvalidRequest(
        f"unsupported tool_choice {json.dumps(choice)}; use 'auto', 'none', 'required', a tool by name "
        "or allowed_tools",
        param="tool_choice",
    )


def sampling_of(wire: object) -> Sampling:
    """The sampling values a wire request sent, by their common names (unchecked: the validator's job)."""
    return Sampling(**{name: getattr(wire, name, None) for name in _SAMPLING})
