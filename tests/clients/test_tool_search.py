"""Tool search with the real clients (issue 39): Claude Code (``ENABLE_TOOL_SEARCH=true``) and Codex,
each given the repository's test MCP server of 105 tools, find one deferred tool and call it.

Claude Code searches with its own ``ToolSearch`` tool and sends the result back as ``tool_reference``
blocks; Codex with its own ``tool_search`` (``execution: "client"``) and a ``tool_search_output``
item. Either way the server keeps the 105 tools out of every prompt's tool list, writes the found
tool's definition into the search result, and the model (scripted) calls it; the call reaches the
MCP server through the client.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tinytitan.testing.mcp_server import NEEDLE, SERVER_NAME, TOOLS

from .conftest import ROOT

if TYPE_CHECKING:
    from .conftest import Claude, Codex, StartStub

CLAUDE_NEEDLE = f"mcp__{SERVER_NAME}__{NEEDLE}"  # Claude Code's name for an MCP tool
ANSWER = "It is sunny in Paris."


def _mcp_command(log: Path) -> tuple[str, list[str], dict[str, str]]:
    return sys.executable, ["-m", "tinytitan.testing.mcp_server", "--log", str(log)], {"PYTHONPATH": str(ROOT)}


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _rules(needle: str, query: str) -> list[dict[str, Any]]:
    return [
        {"when": {"last_tool": needle}, "reply": {"text": ANSWER}},
        {"when": {"revealed": needle}, "reply": {"tool_calls": [{"name": needle, "arguments": {"city": "Paris"}}]}},
        {"when": {"user_contains": "weather"}, "reply": {"search": query}},
        {"reply": {"text": "no"}},
    ]


def test_claude_code_finds_and_calls_a_deferred_mcp_tool(stub: StartStub, claude: Claude) -> None:
    server = stub({"rules": _rules(CLAUDE_NEEDLE, f"select:{CLAUDE_NEEDLE}")})
    log = claude.ws.root / "mcp-calls.jsonl"
    command, args, env = _mcp_command(log)
    config = claude.ws.root / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {SERVER_NAME: {"type": "stdio", "command": command, "args": args, "env": env}}})
    )
    claude.ws.extra_env["ENABLE_TOOL_SEARCH"] = "true"
    run = claude.run(
        server, "what is the weather in Paris?", "--mcp-config", str(config), "--dangerously-skip-permissions"
    )
    assert run.returncode == 0, run.describe()
    assert json.loads(run.stdout)["result"] == ANSWER, run.describe()
    assert _calls(log) == [{"name": NEEDLE, "arguments": {"city": "Paris"}}]

    requests = server.requests()
    mcp_names = {f"mcp__{SERVER_NAME}__{t['name']}" for t in TOOLS}
    for request in requests:  # no MCP tool ever reached a prompt's tool list
        assert not mcp_names & {t["name"] for t in request["tools"]}, request["tools"]
    revealing = [r for r in requests if CLAUDE_NEEDLE in r["revealed"]]
    assert revealing, [r["revealed"] for r in requests]
    assert f'"name": "{CLAUDE_NEEDLE}"' in revealing[0]["prompt"]  # its definition, in the search result


def test_codex_finds_and_calls_a_deferred_mcp_tool(stub: StartStub, codex: Codex) -> None:
    server = stub({"rules": _rules(NEEDLE, "weather forecast")})
    log = codex.ws.root / "mcp-calls.jsonl"
    command, args, env = _mcp_command(log)
    catalog = codex.ws.root / "catalog.json"  # the server's own listing: its Codex entry offers tool_search
    catalog.write_text(httpx.get(server.v1 + "/models", timeout=10).text)
    (codex.ws.config / "config.toml").write_text(
        f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        f"env = {{ PYTHONPATH = {json.dumps(env['PYTHONPATH'])} }}\n"
    )
    run = codex.run(
        server,
        "what is the weather in Paris?",
        "--dangerously-bypass-approvals-and-sandbox",
        "-c",
        f"model_catalog_json={json.dumps(str(catalog))}",
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == ANSWER, run.describe()
    assert _calls(log) == [{"name": NEEDLE, "arguments": {"city": "Paris"}}]

    requests = server.requests()
    assert "tool_search" in {t["name"] for t in requests[0]["tools"]}  # Codex's own search, offered
    for request in requests:
        assert not {t["name"] for t in TOOLS} & {t["name"] for t in request["tools"]}
    revealing = [r for r in requests if NEEDLE in r["revealed"]]
    assert revealing and f'"name": "{NEEDLE}"' in revealing[0]["prompt"]
