"""Deferred tools (``defer_loading``) and what the model sees of them (issue 39).

A deferred tool stays out of the prompt's tool list: the model sees neither its name nor its schema
until the conversation reveals it — a ``tool_reference`` in a tool result (an Anthropic client's own
search, or a server search result sent back), a Responses ``tool_search_output``, or a search the
server runs inside the request (``engine/tool_search``). A revealed tool's definition is written into
that tool result's text, where the model reads it, and from then on the model may call it. The tool
list and everything before the result stay byte-identical, so the prompt cache keeps serving the
prefix on the next turn.

Definitions are written as Claude Code's ``ToolSearch`` tells the model to expect them: one
``<function>{"description", "name", "parameters"}</function>`` line per tool inside a ``<functions>``
block. The same functions write them for a search the server runs and for a result sent back, so
the two render the same tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from tinytitan.engine.errors import InvalidRequest, text_only
from tinytitan.engine.events import Source
from tinytitan.engine.request import Message, Tool, tool_source

__all__ = [
    "NO_MATCH",
    "REFERENCE",
    "SEARCH_KINDS",
    "definitions_text",
    "expand_references",
    "pattern_problem",
    "revealed_text",
    "search_error_text",
    "search_tool",
    "split_tools",
]

REFERENCE = "tool_reference"  # a content part naming a tool (``Part.text``) in a tool message
NO_MATCH = "No tools matched the search."
SEARCH_KINDS = ("regex", "bm25", "openai")
MAX_PATTERN = 200  # characters of a regex search (Anthropic's documented limit)
_EMPTY = {"type": "object", "properties": {}}


def definitions_text(tools: Iterable[Tool]) -> str:
    lines = [
        "<function>"
        + json.dumps(
            {"description": t.description, "name": t.name, "parameters": t.parameters or _EMPTY}, ensure_ascii=False
        )
        + "</function>"
        for t in tools
    ]
    return "<functions>\n" + "\n".join(lines) + "\n</functions>"


def revealed_text(text: str, tools: tuple[Tool, ...]) -> str:
    """A tool result that reveals ``tools``: its own text, then their definitions."""
    if not tools:
        return text or NO_MATCH
    return f"{text}\n\n{definitions_text(tools)}" if text else definitions_text(tools)


def search_error_text(code: str, message: str | None) -> str:
    """A failed search's result as the model reads it (the same for one run here and one sent back)."""
    return f"Error: {code}" + (f": {message}" if message else "")


def pattern_problem(pattern: object) -> str | None:
    """What makes ``pattern`` unusable as a regex search (None: nothing)."""
    if not isinstance(pattern, str) or not pattern:
        return "pattern must be a non-empty string"
    if len(pattern) > MAX_PATTERN:
        return f"pattern is longer than {MAX_PATTERN} characters"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"pattern is not a valid regular expression: {exc}"
    return None


def search_tool(kind: str, name: str, source: Source | None = None) -> Tool:
    """The search tool the server runs, as the model sees it: ``regex`` (a ``pattern``), ``bm25`` and
    ``openai`` (a ``query``); each takes an optional ``limit``."""
    limit = {"type": "integer", "minimum": 1, "description": "Most tools to return (default 5)."}
    if kind == "regex":
        description = (
            "Search the tools that are available but not listed yet. `pattern` is a Python regular expression "
            "(re.search, at most 200 characters) matched against each tool's name, description and argument "
            "names and descriptions; use (?i) to ignore case. The result holds the definitions of the matching "
            "tools; call them afterwards like any listed tool."
        )
        query = {"type": "string", "maxLength": MAX_PATTERN, "description": "A Python regular expression."}
        properties = {"pattern": query, "limit": limit}
        required = ["pattern"]
    else:
        description = (
            "Search the tools that are available but not listed yet, by keywords: `query` is ranked (BM25) "
            "against each tool's name, description and argument names and descriptions. The result holds the "
            "definitions of the best matching tools; call them afterwards like any listed tool."
        )
        if kind == "openai":
            limit = {**limit, "description": "Most tools to return (default 8)."}
        properties = {"query": {"type": "string", "description": "Keywords for the tools you need."}, "limit": limit}
        required = ["query"]
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return Tool(name=name, description=description, parameters=schema, source=source, search=kind)


def split_tools(tools: tuple[Tool, ...]) -> tuple[tuple[Tool, ...], tuple[Tool, ...]]:
    """(the tools the prompt lists, the deferred ones). A search tool cannot be deferred (it is what
    reveals the others), and deferred tools need one that is not (the model must reach them somehow)."""
    for i, tool in enumerate(tools):
        if tool.deferred and tool.search is not None:
            raise InvalidRequest(
                f"the tool search tool '{tool.name}' cannot be deferred: it is what reveals the deferred tools",
                param=tool_source(tool, i).at("defer_loading"),
            )
    listed = tuple(t for t in tools if not t.deferred)
    deferred = tuple(t for t in tools if t.deferred)
    if deferred and not listed:
        raise InvalidRequest(
            "every tool has defer_loading: true; at least one tool (a tool search tool) must not be deferred",
            param="tools",
        )
    return listed, deferred


def expand_references(message: Message, where: Source, catalog: Mapping[str, Tool]) -> tuple[str, tuple[Tool, ...]]:
    """A tool message's text with its ``tool_reference`` parts expanded, and the tools they name. A
    reference to a tool the request does not define is refused by name."""
    assert isinstance(message.content, tuple)
    texts: list[str] = []
    named: list[Tool] = []
    for j, part in enumerate(message.content):
        here = part.source or Source(f"{where.at('content')}[{j}]")
        if part.type != REFERENCE:
            if part.type not in ("text", "input_text", "output_text"):
                raise text_only(f"content parts of type '{part.type}'", here.path)
            texts.append(part.text or "")
            continue
        tool = catalog.get(part.text or "")
        if tool is None:
            raise InvalidRequest(
                f"tool_reference names '{part.text}', which is not among the request's tools",
                param=here.at("tool_name"),
                code="invalid_tool_result",
            )
        if tool not in named:
            named.append(tool)
    return revealed_text("".join(texts), tuple(named)), tuple(named)
