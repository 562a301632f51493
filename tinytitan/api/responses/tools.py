"""The Responses ``tools`` list as the engine's tools: ``function`` tools (deferred ones once revealed,
``tool_search.py``), ``custom`` (freeform) tools, ``namespace`` tools flattened into their functions
and custom tools, and ``tool_search`` (the search); hosted types are left out of the prompt."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tinytitan.api.shapes import custom_format
from tinytitan.engine.events import Source
from tinytitan.engine.request import Tool

from .tool_search import function_tool, tool_search_tool

__all__ = ["map_tools"]


def _custom(tool: dict[str, Any], where: str) -> Tool:
    name, description = tool.get("name"), tool.get("description")
    return Tool(
        name=name if isinstance(name, str) else "",
        description=description if isinstance(description, str) else "",
        type="custom",
        source=Source(where),
        format=custom_format(tool.get("format"), param=f"{where}.format"),
    )


def map_tools(tools: list[dict[str, Any]] | None) -> tuple[Tool, ...]:
    """``function`` tools (``defer_loading`` ones once revealed) and ``custom`` tools reach the model;
    ``namespace`` tools are flattened; ``tool_search`` is the search (``tool_search.py``); hosted types
    are left out."""
    out: list[Tool] = []
    for i, tool in enumerate(tools or ()):
        kind = tool.get("type", "function")
        if kind == "function":
            out.append(function_tool(tool, None, f"tools[{i}]"))
        elif kind == "custom":
            out.append(_custom(tool, f"tools[{i}]"))
        elif kind == "namespace":
            for j, inner in enumerate(tool.get("tools") or ()):
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    out.append(function_tool(inner, tool, f"tools[{i}].tools[{j}]"))
                elif isinstance(inner, dict) and inner.get("type") == "custom":
                    name = tool.get("name") if isinstance(tool.get("name"), str) else None
                    out.append(replace(_custom(inner, f"tools[{i}].tools[{j}]"), namespace=name))
        elif kind == "tool_search":
            out.append(tool_search_tool(tool, f"tools[{i}]"))
        # web_search, file_search, code_interpreter, mcp, image_generation, computer use, shell,
        # local_shell: nothing here runs them; left out of the prompt, not refused
    return tuple(out)
