"""The validator's tool checks (reference §4): the tool list, custom tools' formats, the tool choice.

Function tools carry a JSON schema; ``custom`` tools (issue 38) carry a freeform ``format``: ``text``,
or a ``lark`` / ``regex`` grammar compiled here (``grammar.freeform``) — a grammar the engine cannot
compile, or one this model cannot enforce in its calls, is a 400 naming ``tools[i].format``. The tool
choice names a function or a custom tool, forces a call (``required``), or keeps an ``allowed_tools``
subset: the prompt then shows only those tools, and ``required`` forces one of them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.grammar.freeform import compile_input
from tinytitan.engine.grammar.schema import DEFAULT_TOOL_SCHEMA, compile_schema
from tinytitan.engine.request import ChatRequest, Freeform, ModelInfo, Source, Tool, ToolChoice, tool_source
from tinytitan.engine.request.limits import MAX_TOOLS, check_schema_depth

__all__ = ["check_tool_choice", "check_tools"]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TYPES = ("function", "custom")


def check_tools(request: ChatRequest, model: ModelInfo) -> tuple[Tool, ...]:
    """The request's tools, checked; a custom tool's grammar compiled (``Freeform.compiled``)."""
    if len(request.tools) > MAX_TOOLS:
        raise InvalidRequest(
            f"at most {MAX_TOOLS} tools are allowed, got {len(request.tools)}", param="tools", code="value_too_large"
        )
    seen: set[str] = set()
    checked: list[Tool] = []
    for i, tool in enumerate(request.tools):
        where = tool_source(tool, i)
        if tool.type not in _TYPES:
            raise InvalidRequest(
                f"tools of type '{tool.type}' are not supported; only function and custom tools",
                param=where.at("type"),
                code="unsupported_tool",
            )
        if not _TOOL_NAME.match(tool.name or ""):
            raise InvalidRequest(
                f"invalid tool name '{tool.name}': use 1-64 letters, digits, '_' or '-'",
                param=where.at("name"),
                code="invalid_tool_name",
            )
        if tool.name in seen:
            raise InvalidRequest(f"duplicate tool name '{tool.name}'", param=where.at("name"), code="invalid_tool_name")
        seen.add(tool.name)
        if tool.custom:
            checked.append(replace(tool, format=_freeform(tool.format or Freeform(), where, model)))
            continue
        schema = tool.parameters
        if schema is not None and (not isinstance(schema, dict) or schema.get("type", "object") != "object"):
            raise InvalidRequest(
                "tool parameters must be a JSON schema of type 'object'",
                param=where.at("parameters"),
                code="invalid_tool_schema",
            )
        if schema is not None:
            check_schema_depth(schema, where.at("parameters"))
        checked.append(tool)
    return tuple(checked)


def _freeform(fmt: Freeform, where: Source, model: ModelInfo) -> Freeform:
    param = where.at("format")
    if fmt.type == "text":
        return fmt
    if fmt.type != "grammar":
        raise InvalidRequest(f"unknown custom tool format '{fmt.type}'; use 'text' or 'grammar'", param=f"{param}.type")
    if not isinstance(fmt.syntax, str) or not isinstance(fmt.definition, str):
        raise InvalidRequest("a grammar format needs a 'syntax' and a 'definition' string", param=param)
    try:
        compiled = compile_input(fmt.syntax, fmt.definition)
    except ValueError as exc:
        raise InvalidRequest(f"cannot compile the tool's {fmt.syntax} grammar: {exc}", param=param) from None
    if not model.freeform_grammars:
        raise InvalidRequest(
            "this model's tool-call syntax cannot hold a call's input to a grammar; give the tool "
            "format {'type': 'text'} or serve a model whose syntax can (tinytitan models --details)",
            param=param,
            code="unsupported_value",
        )
    return replace(fmt, compiled=compiled)


def check_tool_choice(
    request: ChatRequest,
    tools: tuple[Tool, ...],
    model: ModelInfo,
    deferred: tuple[Tool, ...] = (),
    revealed: tuple[Tool, ...] = (),
) -> tuple[tuple[Tool, ...], str, str | None]:
    """The tools the prompt shows, the choice's mode and the tool a named choice forces.

    A named choice may name a listed tool or a deferred one the conversation has revealed (it is
    callable, ``ValidatedRequest.callable_tools``); a deferred tool no search has revealed yet is refused."""
    choice = request.tool_choice or ToolChoice("auto")
    param = choice.param
    if choice.allowed is not None:
        tools = _allowed(choice, tools)
    if choice.mode in ("auto", "none"):
        return tools, choice.mode, None
    if choice.mode not in ("required", "function"):
        raise InvalidRequest(f"unsupported tool_choice '{choice.mode}'", param=param)
    forced = choice.name if choice.mode == "function" else None
    if choice.mode == "function" and not forced:
        raise InvalidRequest("a named tool_choice needs the tool's name", param=param)
    if not model.forced_tool_calls:
        raise InvalidRequest(
            f"tool_choice '{choice.mode}' (forcing a tool call) is not supported by this model's decoder; use 'auto'",
            param=param,
            code="unsupported_value",
        )
    if not tools:
        raise InvalidRequest("tool_choice forces a call but no tools were given", param=param)
    if forced is not None and forced not in {t.name for t in tools + revealed}:
        if forced in {t.name for t in deferred}:
            raise InvalidRequest(
                f"tool_choice names '{forced}', a deferred tool no tool search has revealed yet; "
                "name a listed tool, or one a search (or a tool_reference) revealed earlier in the conversation",
                param=param,
            )
        raise InvalidRequest(f"tool_choice names an unknown tool '{forced}'", param=param)
    # a forced call's arguments are grammar-constrained: refuse what cannot be
    for i, tool in enumerate(tools + revealed):
        if (forced is None or tool.name == forced) and not tool.custom:
            compile_schema(tool.parameters or DEFAULT_TOOL_SCHEMA, tool_source(tool, i).at("parameters"))
    return tools, choice.mode, forced


def _allowed(choice: ToolChoice, tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    """An ``allowed_tools`` choice's tools, each one of the request's (a name it lacks is refused)."""
    names = {t.name for t in tools}
    for j, name in enumerate(choice.allowed or ()):
        if name not in names:
            raise InvalidRequest(
                f"allowed_tools names a tool the request does not define: '{name}'",
                param=f"{choice.param}.tools[{j}]",
            )
    keep = set(choice.allowed or ())
    return tuple(t for t in tools if t.name in keep)
