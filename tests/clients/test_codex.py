"""Codex CLI (``codex exec``) end to end against ``serve --stub`` over OpenAI Responses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conftest import Codex, StartStub


REPLY = "hello from tinytitan, verbatim: 3 < 4 & done."


def _user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_say_hi(stub: StartStub, codex: Codex) -> None:
    server = stub({"rules": [{"reply": {"text": REPLY}}]})
    run = codex.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()

    first = server.requests()[0]
    assert first["stream"] is True
    # Codex's base prompt arrives as a developer message; it becomes the leading system message.
    assert "Codex CLI" in first["system"]
    assert _user_texts(first)[-1] == "say hi"
    assert first["messages"][-1] == {"role": "user", "content": "say hi", "tool_calls": [], "tool_call_id": None}
    # Its shell tool is a function tool with a `cmd` string; web_search (hosted) is left out.
    tools = {t["name"]: t for t in first["tools"]}
    assert "cmd" in tools["exec_command"]["parameters"]["properties"]
    assert "web_search" not in tools


def test_tool_round_trip(stub: StartStub, codex: Codex) -> None:
    command = "printf 'written by codex' > hello.txt"
    server = stub(
        {
            "rules": [
                {"when": {"last_role": "tool"}, "reply": {"text": "Created hello.txt."}},
                {
                    "when": {"user_contains": "hello.txt"},
                    "reply": {
                        "reasoning": "Use the shell.",
                        "tool_calls": [{"name": "exec_command", "arguments": {"cmd": command}}],
                    },
                },
            ]
        }
    )
    # No sandbox: `-s workspace-write` works here too, but needs user namespaces for bubblewrap, which
    # a CI container may not grant; the run is confined to its temporary directory either way.
    run = codex.run(server, "create hello.txt", "--dangerously-bypass-approvals-and-sandbox")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Created hello.txt.", run.describe()
    assert (codex.ws.work / "hello.txt").read_text() == "written by codex"

    first, second = server.requests()[:2]
    assert first["messages"][-1]["role"] == "user"
    call_turn, result_turn = second["messages"][-2:]
    (call,) = call_turn["tool_calls"]
    assert call_turn["role"] == "assistant" and call["name"] == "exec_command"
    assert '"cmd"' in call["arguments"] and "hello.txt" in call["arguments"]
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call["id"]
    assert "Process exited with code 0" in result_turn["content"]  # what Codex reports from exec_command


def test_thinking(stub: StartStub, codex: Codex) -> None:
    server = stub(
        {
            "reasoning_levels": ["off", "low", "medium", "high"],
            "default_reasoning": "low",
            "rules": [{"reply": {"reasoning": "Weighing the options first.", "text": REPLY}}],
        }
    )
    run = codex.run(
        server,
        "think, then answer",
        "-c",
        'model_reasoning_effort="high"',
        "-c",
        'model_reasoning_summary="detailed"',
        json_events=True,
    )
    assert run.returncode == 0, run.describe()
    events = run.json_lines()
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    assert {"type": "reasoning", "text": "Weighing the options first."} in [
        {k: i[k] for k in ("type", "text")} for i in items if i["type"] == "reasoning"
    ]
    assert [i["text"] for i in items if i["type"] == "agent_message"] == [REPLY]
    (done,) = [e for e in events if e.get("type") == "turn.completed"]
    assert done["usage"]["reasoning_output_tokens"] > 0
    assert done["usage"]["output_tokens"] >= done["usage"]["reasoning_output_tokens"]

    # The effort Codex was told to use is the level the engine ran at (not the server default).
    assert [r["reasoning_level"] for r in server.requests()] == ["high"]
