"""Compaction on the scripted backend (reference §11): the continuation, the transcript fallback,
budget, guards, passes, payload."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from typing import Any

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.models.stub import StubBackend, load_script
from tinytitan.engine.passes.compaction import (
    COMPRESS_ASK,
    HANDOVER_ASK,
    HANDOVER_INSTRUCTION,
    RETRY_ASK,
    CompactionResult,
    compact,
    compaction_budget,
    conversation,
    decode_payload,
    drop_echoed_lines,
    encode_payload,
    is_repetition_loop,
    keep_users_words,
    render_transcript,
    summary_preamble,
    trim_middle,
)
from tinytitan.engine.request import ChatRequest, Message, Part, Source, Tool, ToolCall, ToolChoice
from tinytitan.engine.service import Engine

MODEL = "stub-model"
SESSION = (
    Message("system", "You are a coding agent."),
    Message("user", "Make the build use ruff; keep line length 110."),
    Message("assistant", "Checking.", tool_calls=(ToolCall("c1", "exec", '{"cmd": "cat pyproject.toml"}'),)),
    Message("tool", "[tool.ruff]\nline-length = 100", tool_call_id="c1"),
    Message("assistant", "I changed line-length to 110 in pyproject.toml; black was rejected (slower)."),
)
NOTE = (
    "Requirements:\n- ruff with line length 110\nDecisions:\n- ruff over black (slower)\nNext step:\n- run ruff check"
)
LOOP = "\n".join(["- the same line repeated again and again"] * 8)
PLAIN = "Plain: ruff, line length 110."


def _run(
    rules: list[dict[str, Any]],
    *,
    max_tokens: int | None = None,
    context: int = 8192,
    messages: tuple[Message, ...] = SESSION,
    request: ChatRequest | None = None,
    before: ChatRequest | None = None,
    instruction: str | None = None,
) -> tuple[CompactionResult, StubBackend, list[str]]:
    """``compact`` over a stub engine (after ``before``, a turn of the session, when given)."""
    backend = StubBackend(load_script({"model": MODEL, "context_window": context, "rules": rules}))
    engine = Engine(backend)
    seen: list[str] = []

    async def run() -> CompactionResult:
        if before is not None:
            await engine.complete(before)
        work = request or conversation(MODEL, messages)
        return await compact(engine, work, max_tokens=max_tokens, progress=seen.append, instruction=instruction)

    try:
        result = asyncio.run(run())
    finally:
        engine.shutdown()
    return result, backend, seen


def _ask(ask: str, text: str, **reply: Any) -> dict[str, Any]:
    return {"when": {"user_contains": ask}, "reply": {"text": text, **reply}}


@pytest.mark.parametrize(
    ("context", "asked", "budget"),
    [
        (32768, None, 4096),
        (8192, None, 1024),
        (1024, None, 256),
        (100_000, None, 4096),
        (8192, 10_000, 4096),
        (8192, 300, 300),
    ],
)
def test_budget_arithmetic(context: int, asked: int | None, budget: int) -> None:
    assert compaction_budget(context, asked) == budget


@pytest.mark.parametrize("bad", [0, -5])
def test_a_budget_below_one_is_refused(bad: int) -> None:
    with pytest.raises(InvalidRequest) as info:
        compaction_budget(8192, bad)
    assert info.value.param == "max_compaction_tokens"


def test_transcript_is_role_labelled_with_calls_inline() -> None:
    earlier = Message("system", summary_preamble("earlier"), server=True)
    text = render_transcript((earlier, *SESSION))
    assert text.startswith("[earlier summary] This session continues")
    assert "earlier\n\n[user] Make the build use ruff" in text
    assert '[assistant tool call] exec {"cmd": "cat pyproject.toml"}' in text
    assert "[tool result exec] [tool.ruff]" in text
    assert "You are a coding agent" not in text


def test_the_note_is_the_next_turn_of_the_conversation_at_temperature_zero_thinking_off() -> None:
    """Issue 40.1: the pass is the conversation as the model read it, the ask one more user turn."""
    result, backend, seen = _run([_ask(HANDOVER_ASK, NOTE)])
    assert (result.mode, result.read, result.note, result.passes) == ("model", "continuation", NOTE, 1)
    recorded = backend.recorded[-1]
    assert recorded["sampling"]["temperature"] == 0.0 and recorded["reasoning_level"] == "off"
    assert recorded["system"] == "You are a coding agent."  # the session's own, not an instruction
    *session, ask = recorded["messages"]
    assert [m["role"] for m in session] == ["user", "assistant", "tool", "assistant"]
    assert session[-1]["content"].startswith("I changed line-length to 110")
    assert ask["role"] == "user" and ask["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.tokens == backend.count_text(NOTE)
    assert result.first_token_s is not None and result.first_pass == result.usage
    assert seen and "model" in seen[-1]
    assert decode_payload(result.payload())["read"] == "continuation"


def test_the_prompt_cache_serves_the_conversation_after_its_last_turn() -> None:
    """Compacting right after a turn: all but the last reply and the ask comes from the cache."""
    long = tuple(
        Message(role, f"{role} turn {i}: " + " ".join(f"fact{i}x{j}" for j in range(60)))
        for i in range(30)
        for role in ("user", "assistant")
    )
    session = (SESSION[0], *long, Message("user", "And the last question?"))
    last_turn = ChatRequest(model=MODEL, messages=session)
    replied = (*session, Message("assistant", "hello from tinytitan"))
    result, backend, _ = _run([_ask(HANDOVER_ASK, NOTE)], messages=replied, before=last_turn)
    first = result.first_pass
    assert first.prompt_tokens == backend.count_text(backend.recorded[-1]["prompt"])
    assert first.cached_tokens / first.prompt_tokens >= 0.9
    assert result.usage.cached_tokens == first.cached_tokens  # one pass


def test_the_pass_keeps_the_tools_the_conversation_was_read_with_and_never_forces_one() -> None:
    tool = Tool("exec", "run a command", {"type": "object", "properties": {}})
    request = ChatRequest(model=MODEL, messages=SESSION, tools=(tool,), tool_choice=ToolChoice("required"))
    result, backend, _ = _run([_ask(HANDOVER_ASK, NOTE)], request=request)
    recorded = backend.recorded[-1]
    assert [t["name"] for t in recorded["tools"]] == ["exec"] and recorded["tool_choice"] == "auto"
    assert result.note == NOTE


def test_a_conversation_past_the_window_is_read_as_a_trimmed_transcript_and_says_so() -> None:
    """Issue 40.1: the fallback is named (mode, read, a progress line), and its marker counts the
    whole cut — trimming the trimmed text again under-reported it by the first cut."""
    long = tuple(Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * 120) for i in range(40))
    result, backend, seen = _run([_ask(HANDOVER_ASK, NOTE)], context=2048, messages=(SESSION[0], *long))
    assert (result.mode, result.read, result.note) == ("transcript", "transcript", NOTE)
    assert decode_payload(result.payload())["mode"] == "transcript"
    assert any("no longer fits the context window" in line for line in seen)
    recorded = backend.recorded[-1]
    assert recorded["system"] == HANDOVER_INSTRUCTION
    body = recorded["messages"][-1]["content"].removesuffix(f"\n\n{HANDOVER_ASK}")
    transcript = render_transcript(long)
    marker = re.search(r"\n\n\[… (\d+) characters omitted …\]\n\n", body)
    assert marker is not None and body.count("characters omitted") == 1
    head, tail = body[: marker.start()], body[marker.end() :]
    assert transcript.startswith(head) and transcript.endswith(tail)
    assert len(transcript) - 4 <= len(head) + int(marker.group(1)) + len(tail) <= len(transcript)


def test_an_instruction_replaces_the_handover_ask() -> None:
    result, backend, _ = _run([_ask("Summarize as haiku", "a haiku of 110")], instruction="Summarize as haiku.")
    assert result.note == "a haiku of 110"
    assert backend.recorded[-1]["messages"][-1]["content"] == "Summarize as haiku."


def test_what_the_user_said_about_themselves_and_their_work_is_kept() -> None:
    """Issue 40.1: a three-turn chat's note dropped the user's name; a small model drops exactly the
    names, numbers and files. What the note lost is quoted after it, as the user's own words."""
    chat = (
        Message("user", "Hi, I'm Priya. I maintain the payments service; the code is in payments/api.py."),
        Message("assistant", "Nice to meet you, Priya! How can I help?"),
        Message("user", "The refund endpoint returns HTTP 500 when the amount is 0. We ship version 2.4 on Friday."),
        Message("assistant", "Done: the handler now returns 400 for amount 0."),
    )
    result, _, _ = _run([_ask(HANDOVER_ASK, "The refund handler was fixed; ship on Friday.")], messages=chat)
    assert result.note == (
        "The refund handler was fixed; ship on Friday.\n\n"
        "The user's own words (the user said this, not the assistant):\n"
        "- Hi, I'm Priya.\n"
        "- I maintain the payments service; the code is in payments/api.py.\n"
        "- The refund endpoint returns HTTP 500 when the amount is 0.\n"
        "- We ship version 2.4 on Friday."
    )
    kept, _, _ = _run([_ask(HANDOVER_ASK, "Priya (payments/api.py): 500 on amount 0 fixed; ship 2.4.")], messages=chat)
    assert kept.note == "Priya (payments/api.py): 500 on amount 0 fixed; ship 2.4."  # nothing lost, nothing added
    assert (
        keep_users_words("x", chat, 20)
        == "x\n\nThe user's own words (the user said this, not the assistant):\n- Hi, I'm Priya."
    )


def test_a_note_that_ends_with_the_ask_loses_that_line() -> None:
    """Issue 40.1: a three-turn chat's note ended with the instruction line itself."""
    result, _, _ = _run([_ask(HANDOVER_ASK, f"{NOTE}\n{HANDOVER_ASK}")])
    assert result.note == NOTE


def test_guard_drops_echoed_instruction_lines() -> None:
    echoed = "- Requirements: what the user asked for, with every constraint.\n" + NOTE
    result, _, _ = _run([_ask(HANDOVER_ASK, echoed)])
    assert result.note == NOTE and result.mode == "model"
    echo = "1. Quote file paths, commands and identifiers exactly as they appear."
    assert drop_echoed_lines(f"{echo}\nkeep me", HANDOVER_INSTRUCTION) == "keep me"


def test_repetition_loop_is_retried_once_with_a_plain_instruction() -> None:
    assert is_repetition_loop(LOOP) and not is_repetition_loop(NOTE)
    result, backend, _ = _run(
        [_ask(HANDOVER_ASK, LOOP), _ask(RETRY_ASK, "Short plain summary: ruff, line length 110.")]
    )
    assert (result.mode, result.note, result.passes) == (
        "model",
        "Short plain summary: ruff, line length 110.",
        2,
    )
    assert len(backend.recorded) == 2


def test_usage_sums_every_pass_the_stopped_one_too() -> None:
    result, backend, seen = _run([_ask(HANDOVER_ASK, LOOP), _ask(RETRY_ASK, PLAIN)])
    stopped = result.usage.completion_tokens - backend.count_text(PLAIN)
    assert 0 < stopped < backend.count_text(LOOP)  # stopped at its sixth line, not at its end
    assert result.tokens == backend.count_text(PLAIN) and result.discarded == 1
    assert seen[-1].endswith(f"2 passes wrote {result.usage.completion_tokens} tokens, 1 discarded as loops")


@pytest.mark.parametrize(
    "forever",
    [
        "\n".join(["- the build uses ruff with line length 110"] * 20_000),  # one line again and again
        "The session was about ruff and its line length, which is 110. " * 20_000,  # a verbatim cycle, no lines
    ],
    ids=["lines", "cycle"],
)
def test_a_pass_that_repeats_forever_is_stopped_while_it_generates(forever: str) -> None:
    """The first pass would write until its cap (2,048 tokens here); it stops within a few hundred."""
    result, backend, seen = _run([_ask(HANDOVER_ASK, forever), _ask(RETRY_ASK, PLAIN)])
    assert (result.note, result.passes, result.discarded) == (PLAIN, 2, 1)
    stopped = result.usage.completion_tokens - backend.count_text(PLAIN)
    assert 0 < stopped <= 300
    assert any(f"compaction pass 1 was repeating itself: stopped after {stopped} tokens" in line for line in seen)


def test_empty_note_twice_falls_back_to_extractive() -> None:
    result, _, _ = _run([_ask(HANDOVER_ASK, ""), _ask(RETRY_ASK, LOOP)], max_tokens=50)
    assert result.mode == "extractive" and result.passes == 2 and result.read == "continuation"
    transcript = render_transcript(SESSION)
    assert len(result.note) <= 50 * 3 + 60  # budget × 3 characters plus the marker
    assert result.note.startswith(transcript[:10]) and result.note.endswith(transcript[-10:])
    assert "characters omitted" in result.note


def test_note_over_budget_is_compressed() -> None:
    long_note = NOTE + "\n" + "\n".join(f"- detail number {i} about the build" for i in range(40))
    result, _, _ = _run(
        [_ask(COMPRESS_ASK, "- ruff, 110; next: run ruff check"), _ask(HANDOVER_ASK, long_note)],
        max_tokens=64,
    )
    assert (result.mode, result.note, result.passes) == ("compressed", "- ruff, 110; next: run ruff check", 2)


def test_compression_still_over_budget_trims_the_note() -> None:
    long_note = NOTE + "\n" + "\n".join(f"- detail number {i} about the build" for i in range(40))
    result, backend, _ = _run([_ask(COMPRESS_ASK, long_note + " more"), _ask(HANDOVER_ASK, long_note)], max_tokens=64)
    assert result.mode == "extractive" and result.tokens <= 64
    assert result.tokens == backend.count_text(result.note)
    assert "characters omitted" in result.note


def test_nothing_to_compact() -> None:
    with pytest.raises(InvalidRequest) as info:
        _run([_ask(HANDOVER_ASK, NOTE)], messages=(Message("system", "only guidance"),))
    assert info.value.message == "nothing to compact: input carries no messages"


def test_a_non_text_part_is_refused_where_the_client_wrote_it_never_dropped() -> None:
    """Issue 28.2: the transcript reads parts with the validator's rule, so an image is a 400 naming it."""
    image = Part("image_url", source=Source("messages[1].content[1]"))
    look = Message("user", (Part("text", "look at this"), image))
    with pytest.raises(InvalidRequest) as info:
        _run([_ask(HANDOVER_ASK, NOTE)], messages=(*SESSION[:1], look))
    assert (info.value.code, info.value.param) == ("unsupported_content", "messages[1].content[1]")
    assert info.value.message == "content parts of type 'image_url' are not supported; this server is text-only"


def test_payload_round_trip_and_version_check() -> None:
    payload = encode_payload("the summary", "compressed", MODEL, created_at=123)
    raw = base64.b64decode(payload).decode()
    assert raw == '{"createdAt":123,"mode":"compressed","model":"stub-model","summary":"the summary","v":1}'
    read = encode_payload("s", "model", MODEL, created_at=1, read="continuation", prunes=True)
    assert json.loads(base64.b64decode(read)) == {
        "createdAt": 1,
        "mode": "model",
        "model": MODEL,
        "prunes": True,
        "read": "continuation",
        "summary": "s",
        "v": 1,
    }
    assert decode_payload(payload)["summary"] == "the summary"
    other = base64.b64encode(json.dumps({"v": 9, "summary": "x"}).encode()).decode()
    with pytest.raises(InvalidRequest) as info:
        decode_payload(other)
    assert info.value.code == "compaction_payload_version"


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ("%%%", "compaction_payload_invalid"),
        (base64.b64encode(b"[1]").decode(), "compaction_payload_invalid"),
        (None, "invalid_value"),
    ],
    ids=["not base64", "not an object", "missing"],
)
def test_a_broken_payload_is_refused_by_code(payload: str | None, code: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_payload(payload)
    assert info.value.code == code


def test_trim_middle_keeps_head_third_and_tail() -> None:
    text = "".join(chr(97 + i % 26) for i in range(300))
    out = trim_middle(text, 90)
    head, tail = out.split("\n\n[… ")[0], out.split(" …]\n\n")[1]
    assert text.startswith(head) and len(head) == 30 and text.endswith(tail) and len(tail) == 60
    assert trim_middle("short", 90) == "short"
