"""Tool search on Responses (issue 39): the ``tool_search`` tool, deferred (namespace) tools, their items.

- ``{"type": "tool_search"}`` with ``execution: "server"`` (or none, the API's default): the hosted
  search. The model sees a ``tool_search`` function (``query``, ``limit``); the server runs BM25 over
  the deferred tools — function tools, and namespaces' functions, sent with ``defer_loading: true`` —
  inside the request (``engine/tool_search``), and the response carries a ``tool_search_call`` item
  (``execution: "server"``) and a ``tool_search_output`` item (the found tools' definitions as sent,
  deferred, a namespace's functions inside their namespace) where it ran.
- ``execution: "client"`` (Codex's own BM25 over its MCP tools, ``codex-rs`` ``tool_search``): the
  model sees a ``tool_search`` function with the client's description and parameters; its call comes
  back as a ``tool_search_call`` item (``execution: "client"``, ``call_id``, the arguments as an
  object), and the client answers with a ``tool_search_output`` item.
- ``tool_search_call`` / ``tool_search_output`` input items are the call and its result turn; the
  tools an output lists are revealed (``engine/request/deferred.py``) — written into that result,
  callable from then on, their calls ``function_call`` items naming their namespace. Tools an output
  lists that the request's ``tools`` lack join them, deferred (Codex sends only the output).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source, ToolCall, ToolSearched
from tinytitan.engine.request import Message, Part, Tool, new_id
from tinytitan.engine.request.deferred import NO_MATCH, REFERENCE, search_tool

from .items import InputToolSearchCallItem, InputToolSearchOutputItem
from .wire import ToolSearchCallItem, ToolSearchOutputItem

__all__ = [
    "NAME",
    "SearchItems",
    "check_call_item",
    "check_output_item",
    "function_tool",
    "output_message",
    "output_tools",
    "search_call",
    "tool_search_tool",
    "with_loaded",
]

NAME = "tool_search"
_DEFAULT_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def function_tool(tool: dict[str, Any], namespace: dict[str, Any] | None, where: str) -> Tool:
    """A function tool (inside ``namespace`` when given), deferred when it or its namespace says so."""
    name, description = tool.get("name"), tool.get("description")
    space_name = namespace.get("name") if namespace is not None else None
    space_text = namespace.get("description") if namespace is not None else None
    deferred = tool.get("defer_loading") is True or (namespace is not None and namespace.get("defer_loading") is True)
    return Tool(
        name=name if isinstance(name, str) else "",
        description=description if isinstance(description, str) else "",
        parameters=tool.get("parameters"),
        namespace=space_name if isinstance(space_name, str) else None,
        source=Source(where),
        deferred=deferred,
        namespace_description=space_text if isinstance(space_text, str) else None,
    )


def tool_search_tool(tool: dict[str, Any], where: str) -> Tool:
    """``tool_search``: the hosted search (the server runs it), or a client's own (``execution: "client"``)."""
    execution = tool.get("execution", "server")
    if execution not in ("server", "client"):
        raise InvalidRequest("execution must be 'server' or 'client'", param=f"{where}.execution")
    deferred = tool.get("defer_loading") is True
    if execution == "server":
        return replace(search_tool("openai", NAME, Source(where)), deferred=deferred)
    description, parameters = tool.get("description"), tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise InvalidRequest("parameters must be a JSON schema object", param=f"{where}.parameters")
    return Tool(
        name=NAME,
        description=description if isinstance(description, str) else "Search the deferred tools.",
        parameters=parameters or _DEFAULT_PARAMETERS,
        source=Source(where),
        deferred=deferred,
    )


def _arguments(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            value = None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest("arguments must be a JSON object", param=f"{where}.arguments")
    return value


def check_call_item(item: dict[str, Any], where: str) -> None:
    _arguments(item.get("arguments"), where)
    if item.get("execution", "client") not in ("server", "client"):
        raise InvalidRequest("execution must be 'server' or 'client'", param=f"{where}.execution")


def check_output_item(item: dict[str, Any], where: str) -> None:
    tools = item.get("tools")
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise InvalidRequest("tools must be a list of tool definitions", param=f"{where}.tools")


def search_call(item: InputToolSearchCallItem, where: str) -> ToolCall:
    """A ``tool_search_call`` sent back: the model's call (its id: ``call_id``, else the item's)."""
    call_id = item.call_id if isinstance(item.call_id, str) and item.call_id else item.id
    arguments = json.dumps(_arguments(item.arguments if item.arguments is not None else {}, where), ensure_ascii=False)
    return ToolCall(call_id, NAME, arguments, source=Source(where, {"id": "call_id"}))


def output_tools(item: InputToolSearchOutputItem, where: str) -> list[Tool]:
    """The tools a ``tool_search_output`` loaded (a namespace's functions flattened), all deferred."""
    found: list[Tool] = []
    for k, tool in enumerate(item.tools):
        here = f"{where}.tools[{k}]"
        kind = tool.get("type", "function")
        if kind == "function":
            found.append(replace(function_tool(tool, None, here), deferred=True))
        elif kind == "namespace":
            for j, inner in enumerate(tool.get("tools") or ()):
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    found.append(replace(function_tool(inner, tool, f"{here}.tools[{j}]"), deferred=True))
    return found


def with_loaded(tools: tuple[Tool, ...], found: list[Tool]) -> tuple[Tool, ...]:
    """The request's tools, and the ones tool_search_output items loaded that it lacks (deferred)."""
    named = {t.name for t in tools}
    loaded: list[Tool] = []
    for tool in found:
        if tool.name not in named:
            named.add(tool.name)
            loaded.append(tool)
    return tools + tuple(loaded)


def output_message(item: InputToolSearchOutputItem, call_id: str, where: str, found: list[Tool]) -> Message:
    """A ``tool_search_output`` as the tool turn that reveals what it found."""
    source = Source(where, {"tool_call_id": "call_id"})
    if not found:
        return Message("tool", NO_MATCH, tool_call_id=call_id, source=source)
    parts = tuple(Part(REFERENCE, t.name, t.source) for t in found)
    return Message("tool", parts, tool_call_id=call_id, source=source)


class SearchItems:
    """The output items of tool searches, from the request's ``tools`` as sent: a client's own search
    (its calls become ``tool_search_call`` items), and the definitions a server search returns."""

    def __init__(self, tools: list[dict[str, Any]] | None) -> None:
        self.client = False
        self.definitions: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {}  # name → (namespace, tool)
        for tool in tools or ():
            kind = tool.get("type", "function")
            if kind == "tool_search" and tool.get("execution") == "client":
                self.client = True
            elif kind == "function" and isinstance(tool.get("name"), str):
                self.definitions[tool["name"]] = (None, tool)
            elif kind == "namespace":
                for inner in tool.get("tools") or ():
                    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                        self.definitions[inner["name"]] = (tool, inner)

    def client_call(self, call: ToolCall) -> ToolSearchCallItem | None:
        """The ``tool_search_call`` item of a call to a client's own search; None for any other call."""
        if not self.client or call.name != NAME:
            return None
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            arguments = {}
        return ToolSearchCallItem(id=new_id("tsc_"), call_id=call.id, execution="client", arguments=arguments)

    def ran(self, event: ToolSearched) -> tuple[ToolSearchCallItem, ToolSearchOutputItem]:
        """A search the server ran: its call and what it found, in the namespaces the tools came in."""
        try:
            arguments = json.loads(event.call.arguments)
        except ValueError:
            arguments = {}
        call = ToolSearchCallItem(id=new_id("tsc_"), call_id=event.call.id, execution="server", arguments=arguments)
        tools: list[dict[str, Any]] = []
        spaces: dict[str, dict[str, Any]] = {}
        for name in event.found:
            namespace, tool = self.definitions.get(name, (None, {"type": "function", "name": name}))
            loaded = {**tool, "type": "function", "defer_loading": True}
            if namespace is None:
                tools.append(loaded)
                continue
            key = str(namespace.get("name"))
            if key not in spaces:
                spaces[key] = {k: v for k, v in namespace.items() if k != "tools"} | {"tools": []}
                tools.append(spaces[key])
            spaces[key]["tools"].append(loaded)
        status = "incomplete" if event.error is not None else "completed"
        output = ToolSearchOutputItem(id=new_id("tso_"), call_id=event.call.id, status=status, tools=tools)
        return call, output
