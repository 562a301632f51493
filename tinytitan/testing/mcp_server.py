"""A small MCP server with many tools, for tool-search tests (issue 39).

``python -m tinytitan.testing.mcp_server`` speaks MCP over stdio (newline-delimited JSON-RPC 2.0:
``initialize``, ``tools/list``, ``tools/call``, ``ping``). It offers ``TOOLS`` — 105 tools of 21
made-up services, five actions each, with descriptions and parameter schemas the size real MCP
servers send — so a client configured with it has the tool list that makes tool search worth its
while. Every call answers with one deterministic text line that names the tool and its arguments
(``CALLED <name> <arguments as JSON>``), so a test can see the call went through the client to here.
``--log FILE`` appends each call's name and arguments there as a JSON line.

No dependency: the protocol is small enough to answer by hand, and a test must not need the network.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

__all__ = ["NEEDLE", "SERVER_NAME", "TOOLS", "call_text", "main", "tool_definitions"]

SERVER_NAME = "toolbox"
NEEDLE = "weather_get_forecast"  # the one tool a test looks for: nothing else mentions forecasts

_SERVICES: dict[str, tuple[str, str, dict[str, str]]] = {
    # service: (what it holds, its item, the item's fields with their descriptions)
    "weather": (
        "weather stations and forecasts",
        "forecast",
        {"city": "City name, e.g. 'Paris'", "days": "days ahead"},
    ),
    "github": ("GitHub repositories", "issue", {"repo": "owner/name of the repository", "number": "issue number"}),
    "slack": ("Slack workspaces", "message", {"channel": "channel name without '#'", "text": "message text"}),
    "jira": ("Jira projects", "ticket", {"project": "project key, e.g. 'OPS'", "key": "ticket key"}),
    "calendar": ("shared calendars", "event", {"calendar": "calendar id", "start": "ISO 8601 start time"}),
    "drive": ("a cloud drive", "file", {"folder": "folder path", "name": "file name"}),
    "mail": ("a mailbox", "email", {"mailbox": "mailbox address", "subject": "subject line"}),
    "crm": ("a customer database", "contact", {"account": "account id", "email": "contact email"}),
    "billing": ("invoices and payments", "invoice", {"customer": "customer id", "amount": "amount in cents"}),
    "inventory": ("warehouse stock", "item", {"sku": "stock keeping unit", "warehouse": "warehouse code"}),
    "sentry": ("error tracking", "error", {"project": "project slug", "fingerprint": "error fingerprint"}),
    "grafana": ("dashboards and panels", "dashboard", {"folder": "dashboard folder", "uid": "dashboard uid"}),
    "postgres": ("a PostgreSQL database", "table", {"schema": "schema name", "table": "table name"}),
    "redis": ("a Redis cache", "key", {"namespace": "key prefix", "key": "key name"}),
    "kubernetes": ("a Kubernetes cluster", "deployment", {"namespace": "cluster namespace", "name": "deployment"}),
    "docker": ("a container registry", "image", {"repository": "image repository", "tag": "image tag"}),
    "notion": ("a Notion workspace", "page", {"space": "workspace id", "title": "page title"}),
    "figma": ("design files", "frame", {"file": "file key", "node": "node id"}),
    "spotify": ("music playlists", "track", {"playlist": "playlist id", "track": "track id"}),
    "maps": ("maps and routes", "route", {"origin": "start address", "destination": "end address"}),
    "translate": ("a translation service", "translation", {"text": "text to translate", "target": "language code"}),
}
_ACTIONS: dict[str, str] = {
    "get": "Fetch one {item} from {what} by its identifying fields and return every attribute it has.",
    "list": "List the {item}s in {what}, newest first, with paging; filters narrow the result.",
    "create": "Create a new {item} in {what} from the given fields; returns the created {item}'s id.",
    "update": "Change fields of an existing {item} in {what}; fields left out keep their value.",
    "delete": "Delete one {item} from {what}. This cannot be undone; the caller must confirm.",
}


def _tool(service: str, action: str) -> dict[str, Any]:
    what, item, fields = _SERVICES[service]
    properties: dict[str, Any] = {
        field: {"type": "integer" if field in ("number", "amount", "days") else "string", "description": text}
        for field, text in fields.items()
    }
    required = list(fields)[:1]
    if action == "list":
        properties["limit"] = {"type": "integer", "minimum": 1, "maximum": 100, "description": "page size"}
        properties["cursor"] = {"type": "string", "description": "where the previous page ended"}
    if action == "delete":
        properties["confirm"] = {"type": "boolean", "description": "must be true"}
        required.append("confirm")
    name = f"{service}_{action}_{item}"
    description = _ACTIONS[action].format(item=item, what=what)
    if name == NEEDLE:
        description = "Get the weather forecast for a city: temperature, rain and wind for the coming days."
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    }


TOOLS: tuple[dict[str, Any], ...] = tuple(_tool(s, a) for s in _SERVICES for a in _ACTIONS)


def tool_definitions() -> list[dict[str, Any]]:
    """``TOOLS`` as Anthropic tool definitions (``input_schema``), for tests that send them themselves."""
    return [{"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]} for t in TOOLS]


def call_text(name: str, arguments: Any) -> str:
    return f"CALLED {name} {json.dumps(arguments, sort_keys=True)}"


def _answer(message: dict[str, Any], log: str | None) -> dict[str, Any] | None:
    """The response to one JSON-RPC message; None for a notification."""
    method, ident, params = message.get("method"), message.get("id"), message.get("params") or {}
    if ident is None:
        return None
    result: dict[str, Any]
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": list(TOOLS)}
    elif method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or name not in {t["name"] for t in TOOLS}:
            return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name!r}"}}
        if log:
            with open(log, "a", encoding="utf-8") as sink:
                sink.write(json.dumps({"name": name, "arguments": arguments}) + "\n")
        result = {"content": [{"type": "text", "text": call_text(name, arguments)}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method!r}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def serve(stdin: TextIO, stdout: TextIO, log: str | None = None) -> None:
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            reply: dict[str, Any] | None = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}
        else:
            reply = _answer(message, log) if isinstance(message, dict) else None
        if reply is not None:
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--log", help="append each call to this file as a JSON line")
    args = parser.parse_args(argv)
    serve(sys.stdin, sys.stdout, args.log)


if __name__ == "__main__":
    main()
