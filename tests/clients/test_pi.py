"""pi (``pi -p``) end to end against ``serve --stub`` over OpenAI Chat Completions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .conftest import Pi, StartStub


REPLY = "hello from tinytitan, verbatim: 3 < 4 & done."


def test_say_hi(stub: StartStub, pi: Pi) -> None:
    server = stub({"rules": [{"reply": {"text": REPLY}}]})
    run = pi.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == REPLY, run.describe()

    (first,) = server.requests()
    assert first["stream"] is True
    assert "operating inside pi" in first["system"]
    assert first["messages"] == [{"role": "user", "content": "say hi", "tool_calls": [], "tool_call_id": None}]
    assert {"read", "bash", "edit", "write"} <= {t["name"] for t in first["tools"]}


def test_tool_round_trip(stub: StartStub, pi: Pi) -> None:
    target = pi.ws.work / "hello.txt"
    server = stub(
        {
            "rules": [
                {"when": {"last_role": "tool"}, "reply": {"text": "Created hello.txt."}},
                {
                    "when": {"user_contains": "hello.txt"},
                    "reply": {
                        "reasoning": "Write it.",
                        "tool_calls": [
                            {"name": "write", "arguments": {"path": str(target), "content": "written by pi"}}
                        ],
                    },
                },
            ]
        }
    )
    run = pi.run(server, "create hello.txt")
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Created hello.txt.", run.describe()
    assert target.read_text() == "written by pi"

    first, second = server.requests()
    assert first["messages"][-1]["role"] == "user"
    call_turn, result_turn = second["messages"][-2:]
    (call,) = call_turn["tool_calls"]
    assert call_turn["role"] == "assistant" and call["name"] == "write"
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call["id"]
    assert result_turn["content"]  # pi's report of the write


def test_thinking(stub: StartStub, pi: Pi) -> None:
    server = stub(
        {
            "reasoning_levels": ["off", "low", "medium", "high"],
            "default_reasoning": "low",
            "rules": [{"reply": {"reasoning": "Weighing the options first.", "text": REPLY}}],
        }
    )
    run = pi.run(server, "think, then answer", "--thinking", "high", reasoning=True, json_events=True)
    assert run.returncode == 0, run.describe()
    ends = [e["message"] for e in run.json_lines() if e.get("type") == "message_end"]
    assistant = [m for m in ends if m["role"] == "assistant"]
    assert len(assistant) == 1, run.describe()
    assert assistant[0]["content"] == [
        {"type": "thinking", "thinking": "Weighing the options first.", "thinkingSignature": "reasoning_content"},
        {"type": "text", "text": REPLY},
    ]
    assert assistant[0]["stopReason"] == "stop" and assistant[0]["usage"]["output"] > 0

    (first,) = server.requests()
    # pi marks a reasoning model's guidance as a developer message: it is the leading system message.
    assert "operating inside pi" in first["system"]
    assert first["reasoning_level"] == "high"


@pytest.mark.parametrize(
    ("api", "path"), [("openai-responses", "/v1/responses"), ("anthropic-messages", "/v1/messages")]
)
def test_tool_round_trip_over_the_other_protocols(stub: StartStub, pi: Pi, api: str, path: str) -> None:
    """pi speaks all three protocols: the same scripted turn works over Responses and Messages too."""
    target = pi.ws.work / "hello.txt"
    server = stub(
        {
            "reasoning_levels": ["off", "low", "medium", "high"],
            "rules": [
                {"when": {"last_role": "tool"}, "reply": {"reasoning": "It is written.", "text": "Created hello.txt."}},
                {
                    "when": {"user_contains": "hello.txt"},
                    "reply": {
                        "reasoning": "Write it.",
                        "tool_calls": [
                            {"name": "write", "arguments": {"path": str(target), "content": "written by pi"}}
                        ],
                    },
                },
            ],
        }
    )
    run = pi.run(server, "create hello.txt", "--thinking", "high", reasoning=True, api=api)
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "Created hello.txt.", run.describe()
    assert target.read_text() == "written by pi"

    first, second = server.requests()
    assert first["stream"] is second["stream"] is True
    assert "operating inside pi" in first["system"]
    call_turn, result_turn = second["messages"][-2:]
    assert call_turn["tool_calls"][0]["name"] == "write"
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call_turn["tool_calls"][0]["id"]
    # pi's thinking control arrives in each protocol's own spelling (reasoning.effort / thinking budget).
    assert first["reasoning_requested"] and first["reasoning_level"] not in (None, "off")
    assert f'"POST {path} HTTP/1.1" 200' in server.access_log()
