"""What a scripted reply must obey (the scripted backend, ``models/stub.py``).

The real engine cannot break a request's promises — a grammar masks what it writes — so the stub
holds its script to them instead, and a script that would break one fails its test with
``GenerationFailed``: a requested output format, a forced tool call, a custom tool's input grammar.
"""

from __future__ import annotations

import json
from typing import Any

from tinytitan.engine.errors import GenerationFailed
from tinytitan.engine.grammar.freeform import accepts
from tinytitan.engine.request import ValidatedRequest

__all__ = ["check_reply"]


def check_reply(reply: dict[str, Any], request: ValidatedRequest) -> None:
    """``GenerationFailed`` when the scripted ``reply`` breaks what ``request`` asks for."""
    _check_format(reply, request)
    _check_forced(reply, request)
    _check_custom(reply, request)


def _check_custom(reply: dict[str, Any], request: ValidatedRequest) -> None:
    """A scripted call of a custom tool carries its ``input`` as a string, one its grammar parses: the
    real engine constrains the input to the grammar, the stub holds its script to it."""
    if "raw" in reply:
        return
    tools = {t.name: t for t in request.tools}
    for call in reply.get("tool_calls") or []:
        tool = tools.get(call.get("name"))
        if tool is None or not tool.custom:
            if "input" in call:
                raise GenerationFailed(
                    f"stub script call '{call.get('name')}' has an input but no custom tool of that name"
                )
            continue
        text = call.get("input")
        if not isinstance(text, str):
            raise GenerationFailed(f"stub script call of the custom tool '{tool.name}' needs an 'input' string")
        compiled = tool.format.compiled if tool.format is not None else None
        if compiled is not None and not accepts(compiled.grammar, text):
            raise GenerationFailed(f"stub script call '{tool.name}': its input does not parse under the tool's grammar")


def _check_format(reply: dict[str, Any], request: ValidatedRequest) -> None:
    """A scripted reply must obey a requested output format, so a bad script fails its test.

    The real engine cannot emit anything else (the grammar masks it); the stub checks instead, with
    ``jsonschema`` where it is installed (the test extra) and structurally otherwise.
    """
    fmt = request.output_format
    if fmt is None or "raw" in reply:
        return
    text = str(reply.get("text", ""))
    try:
        doc = json.loads(text)
    except ValueError:
        raise GenerationFailed(f"stub script reply is not JSON but {fmt.type} was requested: {text[:80]!r}") from None
    if not isinstance(doc, dict):
        raise GenerationFailed(f"stub script reply is not a JSON object but {fmt.type} was requested")
    if fmt.schema is None:
        return
    try:
        import jsonschema
    except ImportError:
        return
    try:
        jsonschema.validate(doc, fmt.schema)
    except jsonschema.ValidationError as exc:
        raise GenerationFailed(f"stub script reply breaks the requested schema: {exc.message}") from None


def _check_forced(reply: dict[str, Any], request: ValidatedRequest) -> None:
    """A forced tool call (``required`` / a named function) must be in a scripted reply.

    The real engine constrains generation to one call of an allowed tool whose arguments match its
    schema; the stub checks its script instead, so a script that would break that promise fails.
    """
    if request.tool_choice not in ("required", "function") or "raw" in reply:
        return
    calls = reply.get("tool_calls") or []
    if not calls:
        raise GenerationFailed(f"stub script reply has no tool call but tool_choice '{request.tool_choice}' forces one")
    schemas = {t.name: t.parameters for t in request.callable_tools}
    custom = {t.name for t in request.callable_tools if t.custom}
    for call in calls:
        name = call.get("name")
        if request.forced_tool is not None and name != request.forced_tool:
            raise GenerationFailed(f"stub script reply calls '{name}' but tool_choice forces '{request.forced_tool}'")
        if name not in schemas:
            raise GenerationFailed(f"stub script reply calls '{name}', which is not among the request's tools")
        schema = schemas[name]
        if schema is None or name in custom:  # a custom tool's input: _check_custom
            continue
        try:
            import jsonschema
        except ImportError:
            return
        try:
            jsonschema.validate(call.get("arguments", {}), schema)
        except jsonschema.ValidationError as exc:
            raise GenerationFailed(f"stub script call '{name}' breaks its tool's schema: {exc.message}") from None
