"""A request shaped like Claude Code 2.1's (clients.md) is served, not refused, and mapped as §12 says."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tinytitan.testing import sse
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.server import LiveServer

from .support import CONTEXT, MODEL

CLAUDE_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
    "x-api-key": "unused",
    "x-app": "cli",
    "X-Claude-Code-Session-Id": "6f1c1f7e-0000-4000-8000-000000000000",
    "user-agent": "claude-cli/2.1.3 (external, sdk-cli)",
}
TOOL_NAMES = [
    "Task",
    "Bash",
    "Glob",
    "Grep",
    "ExitPlanMode",
    "Read",
    "Edit",
    "Write",
    "NotebookEdit",
    "WebFetch",
    "TodoWrite",
    "WebSearch",
    "BashOutput",
    "KillShell",
    "SlashCommand",
    "Skill",
    "AskUserQuestion",
    "ListMcpResources",
    "ReadMcpResource",
    "EnterPlanMode",
    "MultiEdit",
    "LS",
    "NotebookRead",
    "TaskOutput",
]
INNER_SYSTEM = "# Environment\nWorking directory: /abs/project\nIs a git repo: Yes\n" + "Note. " * 200
BILLING_HEADER = "x-anthropic-billing-header:"
CLAUDE_CODE = "You are Claude Code, Anthropic's official CLI for Claude."
INTERACTIVE = "You are an interactive CLI tool that helps users with software engineering."
TODO_ITEM = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}


def claude_tool(name: str) -> dict[str, Any]:
    description = f"{name}: " + " ".join(
        f"Note {i}: prefer this tool for {name.lower()} work; quote paths exactly." for i in range(12)
    )
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file"},
                "content": {"type": "string", "description": "The content to write"},
                "limit": {"type": "number", "description": "How many lines to read"},
                "mode": {"type": "string", "enum": ["a", "b", "c"]},
                "todos": {"type": "array", "items": TODO_ITEM},
            },
            "required": ["file_path"],
        },
    }


def claude_request(version: str = "2.1.3.8f2", prompt: str = "Say hello.") -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {"type": "text", "text": f"{BILLING_HEADER} cc_version={version}; cc_entrypoint=sdk-cli;"},
            {"type": "text", "text": CLAUDE_CODE, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": INTERACTIVE, "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "system", "content": INNER_SYSTEM},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nThis is a reminder.\n</system-reminder>"},
                    {"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
        "tools": [claude_tool(name) for name in TOOL_NAMES],
        "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "", "session_id": "s"})},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
    }


def send(server: LiveServer, payload: dict[str, Any], path: str = "/v1/messages?beta=true") -> httpx.Response:
    """POST as Claude Code does; the answer is checked against Anthropic's documented shapes."""
    response = httpx.post(server.url + path, json=payload, headers=CLAUDE_HEADERS, timeout=60)
    check_messages_answer(path, response.status_code, response.headers["content-type"], response.text)
    return response


def test_claude_code_request_is_served(server: LiveServer) -> None:
    payload = claude_request()
    assert len(payload["tools"]) == 24 and len(json.dumps(payload["tools"])) > 30_000
    response = send(server, payload)
    assert response.status_code == 200, response.text
    events = sse.events(response.text)
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    recorded = server.recorded[-1]
    assert "x-anthropic-billing-header" not in recorded["prompt"]
    # the billing line dropped, the inner system message joined to the leading system block
    assert recorded["system"] == "\n\n".join([CLAUDE_CODE, INTERACTIVE, INNER_SYSTEM])
    assert [m["role"] for m in recorded["messages"]] == ["user"]
    assert recorded["messages"][0]["content"].startswith("<system-reminder>")
    assert recorded["messages"][0]["content"].endswith("Say hello.")
    assert [t["name"] for t in recorded["tools"]] == TOOL_NAMES
    assert recorded["max_new"] < CONTEXT < 32000  # clamped, not refused
    assert recorded["reasoning_level"] == "on"  # adaptive / effort leave the server default


def test_the_billing_line_does_not_break_the_prompt_prefix(server: LiveServer) -> None:
    first = send(server, {**claude_request(version="2.1.3.aaa"), "stream": False}).json()
    second = send(server, {**claude_request(version="2.1.3.bbb"), "stream": False}).json()
    prompts = [r["prompt"] for r in server.recorded[-2:]]
    assert prompts[0] == prompts[1]
    total = first["usage"]["input_tokens"] + first["usage"]["cache_read_input_tokens"]
    assert second["usage"]["cache_read_input_tokens"] == total - 1  # all but the last prompt token reused


def test_claude_code_count_tokens_and_non_streaming_retry(server: LiveServer) -> None:
    payload = claude_request()
    counting = {k: v for k, v in payload.items() if k not in ("max_tokens", "stream", "metadata")}
    counted = send(server, counting, path="/v1/messages/count_tokens?beta=true")
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 1000
    payload.pop("stream")  # after a broken stream Claude Code retries without it
    retried = send(server, payload)
    assert retried.status_code == 200 and retried.json()["type"] == "message"
    assert (
        retried.json()["usage"]["input_tokens"] + retried.json()["usage"]["cache_read_input_tokens"]
        == (counted.json()["input_tokens"])
    )
