"""Anthropic's ``context_management`` edits (issue 40.2): applied as the API documents them, or refused
by name — never accepted and ignored."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tinytitan.api.anthropic.context import read_edits
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.passes.compaction import summary_preamble
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.server import LiveServer

from .support import MODEL, body

HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "context-management-2025-06-27"}
# Claude Code's own test of a refused edit: it then stops sending it for the session
CLAUDE_CODE_READS = re.compile(
    r"^\S{1,128} does not support the \W?clear_tool_uses_20250919\W? context management strategy"
)
THOUGHTFUL: list[Any] = [
    {"role": "user", "content": "first"},
    {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "old thought", "signature": ""}, {"type": "text", "text": "a"}],
    },
    {"role": "user", "content": "second"},
    {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "new thought", "signature": ""}, {"type": "text", "text": "b"}],
    },
    {"role": "user", "content": "third"},
]


def post(server: LiveServer, payload: dict[str, Any], path: str = "/v1/messages") -> httpx.Response:
    response = httpx.post(server.url + path, json=payload, headers=HEADERS, timeout=30)
    check_messages_answer(path, response.status_code, response.headers["content-type"], response.text)
    return response


def test_clear_tool_uses_is_refused_in_the_words_claude_code_reads(server: LiveServer) -> None:
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3}}
    refused = post(server, body(context_management={"edits": [edit]}))
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and CLAUDE_CODE_READS.match(error["message"]), error
    assert "(context_management.edits[0].type)" in error["message"]


@pytest.mark.parametrize(
    ("management", "param"),
    [
        ({"edits": [{"type": "forget_everything"}]}, "context_management.edits[0].type"),
        ({"edits": [{"type": "compact_20260112", "trigger": {"type": "tool_uses", "value": 3}}]}, "…trigger.type"),
        ({"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 0}}]}, "…trigger.value"),
        ({"edits": [{"type": "compact_20260112", "pause_after_compaction": "yes"}]}, "…pause_after_compaction"),
        ({"edits": [{"type": "compact_20260112"}, {"type": "compact_20260112"}]}, "context_management.edits[1].type"),
        (
            {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": -1}}]},
            "…keep.value",
        ),
        ({"edits": "all"}, "context_management.edits"),
    ],
)
def test_what_the_api_does_not_define_is_refused_by_name(management: Any, param: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        read_edits(management, MODEL)
    expected = param.replace("…", "context_management.edits[0].")
    assert refused.value.param == expected


def test_clear_thinking_drops_older_thoughts_and_reports_it(server: LiveServer) -> None:
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    answer = post(server, body(messages=THOUGHTFUL, context_management={"edits": [edit]}))
    assert answer.status_code == 200, answer.text
    (applied,) = answer.json()["context_management"]["applied_edits"]
    assert applied["type"] == "clear_thinking_20251015" and applied["cleared_thinking_turns"] == 1
    kept = post(server, body(messages=THOUGHTFUL, context_management={"edits": [{**edit, "keep": "all"}]}))
    assert kept.json()["context_management"] == {"applied_edits": []}


def test_count_tokens_applies_the_edits_and_reports_the_original_count(server: LiveServer) -> None:
    payload = body(messages=THOUGHTFUL, context_management={"edits": [{"type": "clear_thinking_20251015"}]})
    payload.pop("max_tokens")
    counted = post(server, payload, "/v1/messages/count_tokens").json()
    assert counted["context_management"]["original_input_tokens"] >= counted["input_tokens"] > 0
    compacted: list[Any] = [
        *THOUGHTFUL[:4],
        {"role": "assistant", "content": [{"type": "compaction", "content": "the note"}]},
    ]
    short = post(server, {"model": MODEL, "messages": compacted}, "/v1/messages/count_tokens").json()
    assert "context_management" not in short  # none was sent
    alone = {"model": MODEL, "messages": [{"role": "user", "content": summary_preamble("the note")}]}
    assert short == post(server, alone, "/v1/messages/count_tokens").json()  # it replaced what came before it


@pytest.mark.parametrize(
    ("block", "param"),
    [
        ({"type": "compaction", "content": ""}, "messages[1].content[0].content"),
        ({"type": "compaction", "content": [{"type": "text", "text": "x"}]}, "messages[1].content[0].content"),
    ],
)
def test_a_bad_compaction_block_is_refused_by_name(server: LiveServer, block: Any, param: str) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]}]
    refused = post(server, {"model": MODEL, "max_tokens": 64, "messages": messages})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith(f"{param}: a compaction block's content must be")


def test_a_compaction_block_from_the_user_is_refused(server: LiveServer) -> None:
    messages = [{"role": "user", "content": [{"type": "compaction", "content": "x"}]}]
    refused = post(server, {"model": MODEL, "max_tokens": 64, "messages": messages})
    assert refused.status_code == 400 and "only allowed in assistant messages" in refused.json()["error"]["message"]
