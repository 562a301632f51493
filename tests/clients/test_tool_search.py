"""Tool search with the real clients (issue 39): Claude Code (``ENABLE_TOOL_SEARCH=true``) and Codex,
each given the repository's test MCP server of 105 tools, find one deferred tool and call it — against
the scripted backend, and Claude Code against a tiny random Qwen3 model (its real template, tokenizer
and call parser) behind a proxy that stands in for the model's choices with API fields only.

Claude Code searches with its own ``ToolSearch`` tool and sends the result back as ``tool_reference``
blocks; Codex with its own ``tool_search`` (``execution: "client"``) and a ``tool_search_output``
item. Either way the server keeps the 105 tools out of every prompt's tool list, writes the found
tool's definition into the search result, and the model (scripted) calls it; the call reaches the
MCP server through the client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tinytitan.testing import sse
from tinytitan.testing.mcp_server import NEEDLE, SERVER_NAME, TOOLS

from .conftest import ROOT, StubServer, _start, _stop
from .proxy import DONE, DONE_TEXT, Proxy

if TYPE_CHECKING:
    from .conftest import Claude, Codex, StartStub

CLAUDE_NEEDLE = f"mcp__{SERVER_NAME}__{NEEDLE}"  # Claude Code's name for an MCP tool
ANSWER = "It is sunny in Paris."


def _mcp_command(log: Path) -> tuple[str, list[str], dict[str, str]]:
    return sys.executable, ["-m", "tinytitan.testing.mcp_server", "--log", str(log)], {"PYTHONPATH": str(ROOT)}


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _claude_with_mcp(claude: Claude) -> tuple[Path, Path]:
    """Claude Code given the test MCP server, tool search on: (the MCP server's call log, its config)."""
    log = claude.ws.root / "mcp-calls.jsonl"
    command, args, env = _mcp_command(log)
    config = claude.ws.root / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {SERVER_NAME: {"type": "stdio", "command": command, "args": args, "env": env}}})
    )
    claude.ws.extra_env["ENABLE_TOOL_SEARCH"] = "true"
    return log, config


def _codex_with_mcp(codex: Codex, server: StubServer) -> tuple[Path, Path]:
    """Codex given the test MCP server: (the MCP server's call log, the server's own catalog, whose
    Codex entry offers ``tool_search``)."""
    log = codex.ws.root / "mcp-calls.jsonl"
    command, args, env = _mcp_command(log)
    catalog = codex.ws.root / "catalog.json"
    catalog.write_text(httpx.get(server.v1 + "/models", timeout=10).text)
    (codex.ws.config / "config.toml").write_text(
        f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
        f"env = {{ PYTHONPATH = {json.dumps(env['PYTHONPATH'])} }}\n"
    )
    return log, catalog


def _rules(needle: str, query: str) -> list[dict[str, Any]]:
    return [
        {"when": {"last_tool": needle}, "reply": {"text": ANSWER}},
        {"when": {"revealed": needle}, "reply": {"tool_calls": [{"name": needle, "arguments": {"city": "Paris"}}]}},
        {"when": {"user_contains": "weather"}, "reply": {"search": query}},
        {"reply": {"text": "no"}},
    ]


def test_claude_code_finds_and_calls_a_deferred_mcp_tool(stub: StartStub, claude: Claude) -> None:
    server = stub({"rules": _rules(CLAUDE_NEEDLE, f"select:{CLAUDE_NEEDLE}")})
    log, config = _claude_with_mcp(claude)
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
    log, catalog = _codex_with_mcp(codex, server)
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


@pytest.fixture
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubServer]:
    """``tinytitan serve --model`` the tiny random Qwen3 model (a family that calls tools)."""
    from tinytitan.testing.device import on_device
    from tinytitan.testing.families import family_dir

    path: Path = on_device(lambda: family_dir("qwen3"))  # built (or found) once per machine
    proc, server = _start(["--model", str(path), "--model-id", "qwen3"], tmp_path_factory.mktemp("qwen3"), "qwen3")
    yield server
    _stop(proc)


def _last_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in _blocks(body["messages"][-1]) if b.get("type") == "tool_result"]


def _choose_for_claude(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """A random model never chooses to search, so: Claude Code's first turn forces its ``ToolSearch``
    with the one query that selects the needle; the turn after the search (its ``tool_reference``
    result) forces the revealed tool with the one city; any later turn answers ``{"done": …}`` and
    ends (a JSON format whose grammar ends the answer)."""
    if not path.endswith("/messages") or not any(t.get("name") == "ToolSearch" for t in body.get("tools", [])):
        return None
    results = _last_results(body)
    searched = any(
        isinstance(r.get("content"), list) and r["content"] and r["content"][0].get("type") == "tool_reference"
        for r in results
    )
    if not any(b.get("type") == "tool_result" for m in body["messages"] for b in _blocks(m)):
        choice, schema = "ToolSearch", {"query": {"type": "string", "enum": [f"select:{CLAUDE_NEEDLE}"]}}
    elif searched:
        choice, schema = CLAUDE_NEEDLE, {"city": {"type": "string", "enum": ["Paris"]}}
    else:
        return {**body, "tool_choice": {"type": "none"}, "output_config": {"format": DONE}}
    for tool in body["tools"]:
        if tool.get("name") == choice:
            tool["input_schema"] = {
                "type": "object",
                "properties": schema,
                "required": [*schema],
                "additionalProperties": False,
            }
    return {**body, "tool_choice": {"type": "tool", "name": choice}}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


@pytest.mark.timeout(700)
def test_claude_code_finds_and_calls_a_deferred_tool_with_a_tiny_qwen3(qwen3: StubServer, claude: Claude) -> None:
    """The search call, the revealed tool's call and both tool results go through Qwen3's own template
    and call parser; the found tool's definition reaches the model only inside the search's result."""
    claude.ws.timeout = 600
    log, config = _claude_with_mcp(claude)
    proxy = Proxy(qwen3.url, _choose_for_claude)
    try:
        run = claude.run(
            proxy.before(qwen3),
            "what is the weather in Paris?",
            "--mcp-config",
            str(config),
            "--dangerously-skip-permissions",
        )
    finally:
        proxy.close()
    seen = [(body.get("tool_choice"), len(body["messages"])) for body in proxy.bodies]  # on failure: what was forced
    assert run.returncode == 0, f"{run.describe()}\n{seen}\n{qwen3.access_log()[-3000:]}"
    assert _calls(log) == [{"name": NEEDLE, "arguments": {"city": "Paris"}}], f"{run.describe()}\n{seen}"

    mcp_names = {f"mcp__{SERVER_NAME}__{t['name']}" for t in TOOLS}
    for body in proxy.bodies:  # every MCP tool was sent deferred: none in a prompt's tool list
        assert all(t.get("defer_loading") for t in body["tools"] if t.get("name") in mcp_names)
    calls = [_tool_uses(answer) for answer in proxy.answers]
    assert [c for c in calls if c][:2] == [["ToolSearch"], [CLAUDE_NEEDLE]], calls
    assert json.loads(json.loads(run.stdout)["result"]) in ({"done": True}, {"done": False}), run.describe()


def _tool_uses(answer: bytes) -> list[str]:
    """The tool names a Messages answer (streamed or whole) called."""
    text = answer.decode()
    if text.lstrip().startswith("{"):
        return [b["name"] for b in json.loads(text).get("content", []) if b.get("type") == "tool_use"]
    starts = [data for _, data in sse.events(answer) if data.get("type") == "content_block_start"]
    return [s["content_block"]["name"] for s in starts if s["content_block"]["type"] == "tool_use"]


def _choose_for_codex(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """As for Claude Code, with Codex's own ``tool_search`` (``execution: "client"``): its first turn
    forces the search with a query that finds the needle, the turn after its ``tool_search_output``
    forces the revealed tool with the one city, and any later turn answers ``{"done": …}``."""
    if not path.endswith("/responses") or not any(t.get("type") == "tool_search" for t in body.get("tools", [])):
        return None
    kinds = [item.get("type") for item in body["input"] if isinstance(item, dict)]
    if "tool_search_output" not in kinds:
        body["tool_choice"] = {"type": "function", "name": "tool_search"}
        for tool in body["tools"]:
            if tool.get("type") == "tool_search":
                tool["parameters"] = {
                    "type": "object",
                    "properties": {"query": {"type": "string", "enum": ["weather forecast"]}},
                    "required": ["query"],
                    "additionalProperties": False,
                }
    elif "function_call_output" not in kinds:
        body["tool_choice"] = {"type": "function", "name": NEEDLE}
        for item in body["input"]:
            if isinstance(item, dict) and item.get("type") == "tool_search_output":
                for tool in _functions(item.get("tools") or []):
                    if tool.get("name") == NEEDLE:
                        tool["parameters"] = {
                            "type": "object",
                            "properties": {"city": {"type": "string", "enum": ["Paris"]}},
                            "required": ["city"],
                            "additionalProperties": False,
                        }
    else:
        body["tool_choice"] = "none"
        body["text"] = {**(body.get("text") or {}), "format": DONE_TEXT}
    return body


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Function tools, a namespace's included."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        out.extend(_functions(tool.get("tools") or []) if tool.get("type") == "namespace" else [tool])
    return out


@pytest.mark.timeout(700)
def test_codex_finds_and_calls_a_deferred_tool_with_a_tiny_qwen3(qwen3: StubServer, codex: Codex) -> None:
    codex.ws.timeout = 600
    log, catalog = _codex_with_mcp(codex, qwen3)
    proxy = Proxy(qwen3.url, _choose_for_codex)
    try:
        run = codex.run(
            proxy.before(qwen3),
            "what is the weather in Paris?",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c",
            f"model_catalog_json={json.dumps(str(catalog))}",
            provider_keys={"stream_idle_timeout_ms": 480000},
        )
    finally:
        proxy.close()
    seen = [(body.get("tool_choice"), len(body["input"])) for body in proxy.bodies]  # on failure: what was forced
    assert run.returncode == 0, f"{run.describe()}\n{seen}\n{qwen3.access_log()[-3000:]}"
    assert _calls(log) == [{"name": NEEDLE, "arguments": {"city": "Paris"}}], f"{run.describe()}\n{seen}"
    for body in proxy.bodies:  # the MCP tools reach the server only deferred, or inside a search's output
        assert not {t["name"] for t in TOOLS} & {t.get("name") for t in body["tools"]}
    assert json.loads(run.stdout.strip().splitlines()[-1]) in ({"done": True}, {"done": False}), run.describe()
