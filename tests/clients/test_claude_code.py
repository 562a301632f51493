"""Claude Code (``claude -p``) end to end against ``serve --stub`` over Anthropic Messages."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conftest import Claude, StartStub


REPLY = "hello from tinytitan, verbatim: 3 < 4 & done."


def _result(run: Any) -> dict[str, Any]:
    (result,) = [e for e in run.json_lines() if e.get("type") == "result"]
    return result


def test_say_hi(stub: StartStub, claude: Claude) -> None:
    server = stub({"rules": [{"reply": {"text": REPLY}}]})
    run = claude.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    result = _result(run)
    assert result["is_error"] is False and result["result"] == REPLY, run.describe()
    assert result["num_turns"] == 1

    first = server.requests()[0]
    assert first["stream"] is True
    # The system blocks (billing line dropped) and the inner system message lead as one system message.
    assert "Claude" in first["system"] and "x-anthropic-billing-header" not in first["system"]
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert first["messages"][0]["content"].startswith("<system-reminder>")
    assert first["messages"][0]["content"].rstrip().endswith("say hi")
    assert {"Bash", "Read", "Write", "Edit"} <= {t["name"] for t in first["tools"]}


def test_tool_round_trip(stub: StartStub, claude: Claude) -> None:
    target = claude.ws.work / "hello.txt"
    server = stub(
        {
            "rules": [
                {"when": {"last_role": "tool"}, "reply": {"text": "Created hello.txt."}},
                {
                    "when": {"user_contains": "hello.txt"},
                    "reply": {
                        "reasoning": "Write the file.",
                        "tool_calls": [
                            {"name": "Write", "arguments": {"file_path": str(target), "content": "written by claude"}}
                        ],
                    },
                },
            ]
        }
    )
    run = claude.run(server, "create hello.txt", "--allowedTools", "Write")
    assert run.returncode == 0, run.describe()
    result = _result(run)
    assert result["result"] == "Created hello.txt." and result["permission_denials"] == [], run.describe()
    assert target.read_text() == "written by claude"

    first, second = server.requests()
    assert first["messages"][-1]["role"] == "user"
    call_turn, result_turn = second["messages"][-2:]
    (call,) = call_turn["tool_calls"]
    assert call_turn["role"] == "assistant" and call["name"] == "Write"
    assert json.loads(call["arguments"]) == {"file_path": str(target), "content": "written by claude"}
    assert result_turn["role"] == "tool" and result_turn["tool_call_id"] == call["id"]
    assert "hello.txt" in result_turn["content"]


def test_thinking(stub: StartStub, claude: Claude) -> None:
    server = stub(
        {
            "reasoning_levels": ["off", "low", "medium", "high"],
            "default_reasoning": "medium",
            "rules": [{"reply": {"reasoning": "Weighing the options first.", "text": REPLY}}],
        }
    )
    run = claude.run(server, "think, then answer", output_format="stream-json")
    assert run.returncode == 0, run.describe()
    blocks = [b for e in run.json_lines() if e.get("type") == "assistant" for b in e["message"]["content"]]
    assert {"type": "thinking", "thinking": "Weighing the options first.", "signature": ""} in blocks
    assert {"type": "text", "text": REPLY} in blocks
    assert _result(run)["result"] == REPLY

    (first,) = server.requests()
    # Claude Code asks for adaptive thinking ("you decide"): no level is forced, the server's default runs.
    assert first["reasoning_requested"] == {}
    assert first["reasoning_level"] == "medium"


def test_large_tool_result_makes_it_count_tokens(stub: StartStub, claude: Claude) -> None:
    big = claude.ws.work / "big.txt"
    big.write_text("".join(f"line {i:05d} of a long file\n" for i in range(1500)))  # ~40k characters
    server = stub(
        {
            "rules": [
                {"when": {"last_role": "tool"}, "reply": {"text": "Read it."}},
                {
                    "when": {"user_contains": "big.txt"},
                    "reply": {
                        "reasoning": "Read it.",
                        "tool_calls": [{"name": "Read", "arguments": {"file_path": str(big)}}],
                    },
                },
            ]
        }
    )
    run = claude.run(server, "read big.txt", "--allowedTools", "Read")
    assert run.returncode == 0, run.describe()
    assert _result(run)["result"] == "Read it.", run.describe()
    second = server.requests()[1]
    assert second["messages"][-1]["role"] == "tool" and len(second["messages"][-1]["content"]) > 25_000
    log = server.access_log()
    assert '"POST /v1/messages/count_tokens?beta=true HTTP/1.1" 200' in log, log


def test_broken_stream_is_retried_without_streaming(stub: StartStub, claude: Claude) -> None:
    server = stub(
        {
            "rules": [
                {"when": {"stream": True}, "reply": {"text": "this stream breaks " * 5, "fail_after_events": 3}},
                {"when": {"stream": False}, "reply": {"text": REPLY}},
            ]
        }
    )
    run = claude.run(server, "say hi")
    assert run.returncode == 0, run.describe()
    assert _result(run)["result"] == REPLY, run.describe()
    broken, retried = server.requests()
    assert (broken["stream"], retried["stream"]) == (True, False)
    assert retried["messages"] == broken["messages"] and retried["system"] == broken["system"]
    assert "scripted failure" in server.access_log()


def test_multi_turn_session_resends_history(stub: StartStub, claude: Claude) -> None:
    server = stub(
        {
            "rules": [
                {"when": {"user_contains": "second"}, "reply": {"reasoning": "Again.", "text": "second answer"}},
                {"reply": {"reasoning": "First thoughts.", "text": "first answer"}},
            ]
        }
    )
    run = claude.session(server, "first question", "second question")
    assert run.returncode == 0, run.describe()
    results = [e for e in run.json_lines() if e.get("type") == "result"]
    assert [r["result"] for r in results] == ["first answer", "second answer"], run.describe()
    # The second turn's prompt reuses the first one's: the prefix cache hit is reported to the client.
    assert results[1]["usage"]["cache_read_input_tokens"] > 0

    first, second = server.requests()
    # The whole history is resent; the earlier turn's thinking is not rendered back into the prompt.
    assert [(m["role"], m["content"]) for m in second["messages"][1:]] == [
        ("assistant", "first answer"),
        ("user", "second question"),
    ]
    assert second["messages"][0] == first["messages"][0]


SUMMARY_ASK = "Your task is to create a detailed summary of the conversation so far"
AUTO_COMPACT = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "1"}


def test_its_own_auto_compact_reads_the_session_from_the_prompt_cache(stub: StartStub, claude: Claude) -> None:
    """Issue 40: past its auto-compact threshold (1 % of a 100,000-token window here) Claude Code sends
    its summary request — the session as it stands, the summary ask as the last user turn — and the
    server reads it as a continuation of the last turn's prompt; the summary then starts the session."""
    summary = "<analysis>short</analysis>\n<summary>The user asked to remember the word PLOVER.</summary>"
    server = stub(
        {
            "context_window": 100000,
            "rules": [
                {"when": {"user_contains": SUMMARY_ASK}, "reply": {"text": summary}},
                {"reply": {"text": "noted"}},
            ],
        }
    )
    claude.ws.extra_env.update(AUTO_COMPACT)
    runs = [
        claude.run(server, prompt, *(["--continue"] if i else []), output_format="stream-json")
        for i, prompt in enumerate(["remember PLOVER", "and now?", "what was the word?"])
    ]
    assert all(run.returncode == 0 for run in runs), runs[-1].describe()
    assert any(e.get("subtype") == "compact_boundary" for e in runs[-1].json_lines()), runs[-1].describe()

    requests = server.requests()
    (at,) = [i for i, r in enumerate(requests) if SUMMARY_ASK in r["messages"][-1]["content"]][:1]
    before, compaction, after = requests[at - 1], requests[at], requests[at + 1]
    # the summary request is the last turn's conversation plus its reply and the ask: the same system
    # text and tools, and a prompt that begins with the last turn's, which the prompt cache holds
    assert compaction["system"] == before["system"] and compaction["tools"] == before["tools"]
    assert compaction["prompt"].startswith(before["prompt"].removesuffix("<|im_start|>assistant\n"))
    # the next turn starts from the summary
    assert "PLOVER" in after["messages"][0]["content"] and len(after["messages"]) < len(compaction["messages"])
