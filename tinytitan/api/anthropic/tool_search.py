"""Tool search on Messages (issue 39): the search server tools, deferred tools, and what comes back.

- ``tools``: ``tool_search_tool_regex_20251119`` (or ``tool_search_tool_regex``) and
  ``tool_search_tool_bm25_20251119`` (``tool_search_tool_bm25``) are server tools: the model sees a
  search tool of that name, and the server runs its calls (``engine/tool_search``). Any custom tool
  may carry ``defer_loading: true``: it stays out of the prompt until a search or a
  ``tool_reference`` reveals it (``engine/request/deferred.py``).
- A ``tool_result`` whose content holds ``tool_reference`` blocks (a client's own search, as
  Claude Code's ``ToolSearch``) reveals the tools it names, in a tool message's reference parts.
- An assistant message sent back with ``server_tool_use`` and ``tool_search_tool_result`` blocks is
  the search call and its result: the message is cut after each result, which becomes a tool turn
  naming the tools it found — the turns the server rendered when it ran the search, so the prompt
  cache serves them. A regex search sent back with a pattern that cannot be a regex, and a result
  that claims matches for it, is refused by name.
"""

from __future__ import annotations

from dataclasses import replace

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source
from tinytitan.engine.request import Message, Part, Tool
from tinytitan.engine.request.deferred import NO_MATCH, REFERENCE, pattern_problem, search_error_text, search_tool

from .protocol import ContentBlock, ToolDefinition

__all__ = ["SEARCH_TYPES", "reference_parts", "search_result", "segments", "tool_of"]

SEARCH_TYPES = {
    "tool_search_tool_regex_20251119": ("regex", "tool_search_tool_regex"),
    "tool_search_tool_regex": ("regex", "tool_search_tool_regex"),
    "tool_search_tool_bm25_20251119": ("bm25", "tool_search_tool_bm25"),
    "tool_search_tool_bm25": ("bm25", "tool_search_tool_bm25"),
}
RESULT = "tool_search_tool_result"


def tool_of(t: ToolDefinition, i: int) -> Tool:
    """A custom tool or a search server tool; any other built-in type is refused by name."""
    source = Source(f"tools[{i}]", {"parameters": "input_schema"})
    if t.type in SEARCH_TYPES:
        kind, name = SEARCH_TYPES[t.type]
        if t.name and t.name != name:
            raise InvalidRequest(f"a {t.type} tool must be named '{name}'", param=f"tools[{i}].name")
        return replace(search_tool(kind, name, source), deferred=bool(t.defer_loading))
    if t.type not in (None, "custom"):
        raise InvalidRequest(
            f"tools of type '{t.type}' are not supported; only custom tools {{name, description, input_schema}} "
            "and the tool search tools (tool_search_tool_regex_20251119, tool_search_tool_bm25_20251119)",
            param=f"tools[{i}].type",
            code="unsupported_tool",
        )
    return Tool(
        name=t.name,
        description=t.description or "",
        parameters=t.input_schema,
        source=source,
        deferred=bool(t.defer_loading),
    )


def reference_parts(blocks: list[ContentBlock], where: str, text: str) -> tuple[Part, ...] | None:
    """A tool_result's content as parts when it holds ``tool_reference`` blocks (None: it holds none):
    its ``text`` first, then one reference part per block."""
    if not any(b.type == REFERENCE for b in blocks):
        return None
    parts = [Part("text", text)] if text else []
    for k, block in enumerate(blocks):
        if block.type == REFERENCE:
            here = f"{where}.content[{k}]"
            if not block.tool_name:
                raise InvalidRequest("a tool_reference block needs a tool_name", param=f"{here}.tool_name")
            parts.append(Part(REFERENCE, block.tool_name, Source(here)))
    return tuple(parts)


def search_result(block: ContentBlock, here: str) -> Message:
    """A ``tool_search_tool_result`` sent back: the tool turn the search's result was."""
    if not block.tool_use_id:
        raise InvalidRequest(f"a {RESULT} block needs a tool_use_id", param=f"{here}.tool_use_id")
    source = Source(here, {"tool_call_id": "tool_use_id"})
    content = block.content
    if not isinstance(content, ContentBlock):
        raise InvalidRequest(f"a {RESULT} block's content must be an object", param=f"{here}.content")
    if content.type == "tool_search_tool_result_error":
        text = search_error_text(content.error_code or "unavailable", content.error_message)
        return Message("tool", text, tool_call_id=block.tool_use_id, source=source)
    if content.type != "tool_search_tool_search_result":
        raise InvalidRequest(
            f"unknown {RESULT} content type '{content.type}'; expected tool_search_tool_search_result "
            "or tool_search_tool_result_error",
            param=f"{here}.content.type",
        )
    references = content.tool_references or []
    if not references:
        return Message("tool", NO_MATCH, tool_call_id=block.tool_use_id, source=source)
    parts: list[Part] = []
    for k, reference in enumerate(references):
        where = f"{here}.content.tool_references[{k}]"
        if reference.type != REFERENCE or not reference.tool_name:
            raise InvalidRequest("tool_references holds tool_reference blocks with a tool_name", param=where)
        parts.append(Part(REFERENCE, reference.tool_name, Source(where)))
    return Message("tool", tuple(parts), tool_call_id=block.tool_use_id, source=source)


def _check_pattern(blocks: list[ContentBlock], j: int, where: str) -> None:
    """A regex search sent back whose result claims matches must carry a pattern that is a regex."""
    call = blocks[j]
    if call.name != "tool_search_tool_regex":
        return
    result = next((b for b in blocks if b.type == RESULT and b.tool_use_id == call.id), None)
    failed = result is not None and isinstance(result.content, ContentBlock) and result.content.type.endswith("error")
    pattern = call.input.get("pattern") if isinstance(call.input, dict) else None
    problem = None if failed else pattern_problem(pattern)
    if problem is not None:
        raise InvalidRequest(problem, param=f"{where}.content[{j}].input.pattern", code="invalid_value")


def segments(blocks: list[ContentBlock], where: str) -> list[tuple[int, int, Message | None]]:
    """An assistant message's blocks cut after each ``tool_search_tool_result``: ``(first, end, result)``
    — the run of blocks the model wrote (its ``server_tool_use`` among them), then that result as a
    tool message (None after the last run)."""
    out: list[tuple[int, int, Message | None]] = []
    first = 0
    for j, block in enumerate(blocks):
        if block.type == "server_tool_use":
            _check_pattern(blocks, j, where)
        elif block.type == RESULT:
            out.append((first, j, search_result(block, f"{where}.content[{j}]")))
            first = j + 1
    if first < len(blocks) or not out:
        out.append((first, len(blocks), None))
    return out
