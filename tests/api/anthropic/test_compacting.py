"""Anthropic server-side compaction (issue 40.2): ``compact_20260112`` through the official SDK's beta
surface, every answer and stream event checked against Anthropic's documented shapes on the way in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import anthropic
import httpx2
import pytest

from tinytitan.engine.passes.compaction import HANDOVER_ASK, HANDOVER_INSTRUCTION, summary_preamble
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer

from .support import MODEL

Serve = Callable[..., AbstractContextManager[LiveServer]]
NOTE = "The user: Dana.\nRequirements:\n- keep the API stable\nNext step:\n- run the suite"
BETAS = ["compact-2026-01-12"]
RULES: list[dict[str, Any]] = [
    {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}},
    {"when": {"user_contains": "as a haiku"}, "reply": {"text": "old pond, frog jumps in"}},
    {"when": {"user_contains": "compacted"}, "reply": {"text": "Continuing from the summary."}},
    {"reply": {"text": "hello from tinytitan"}},
]
SESSION: list[Any] = [
    {"role": "user", "content": "I'm Dana. Keep the public API stable. " + "Context. " * 60},
    {"role": "assistant", "content": "Understood, Dana."},
    {"role": "user", "content": "Now run the suite."},
]


def _checked(response: httpx2.Response) -> None:
    """Every answer the SDK reads, against the documented shapes (a stream: every event)."""
    response.read()
    content_type = response.headers.get("content-type", "")
    check_messages_answer(response.request.url.path, response.status_code, content_type, response.text)


@pytest.fixture
def live(serve: Serve) -> Iterator[LiveServer]:
    with serve(script(*RULES, context_window=16384)) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[anthropic.Anthropic]:
    http = httpx2.Client(event_hooks={"response": [_checked]}, timeout=30)
    with anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0, http_client=http) as sdk:
        yield sdk


def _edit(**fields: Any) -> Any:
    return {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50}, **fields}]}


def test_past_the_trigger_the_answer_starts_with_the_compaction_block(
    client: anthropic.Anthropic, live: LiveServer
) -> None:
    message = client.beta.messages.create(
        model=MODEL, max_tokens=512, messages=SESSION, betas=BETAS, context_management=_edit()
    )
    compaction, text = message.content
    assert compaction.type == "compaction" and compaction.content == NOTE
    assert text.type == "text" and text.text == "Continuing from the summary."
    assert message.stop_reason == "end_turn"
    passes, answer = message.usage.iterations or []
    assert passes.type == "compaction" and passes.input_tokens + passes.cache_read_input_tokens > 0
    assert answer.type == "message" and message.usage.output_tokens == answer.output_tokens
    # the pass read the session as the model reads it, then the answer read the compacted window
    compacting, answering = live.recorded
    assert [m["content"] for m in compacting["messages"]][:-1] == [m["content"] for m in SESSION]
    assert compacting["messages"][-1]["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
    assert [(m["role"], m["content"]) for m in answering["messages"]] == [("user", summary_preamble(NOTE))]


def test_paused_it_stops_at_the_block_and_the_block_sent_back_continues(
    client: anthropic.Anthropic, live: LiveServer
) -> None:
    message = client.beta.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=SESSION,
        betas=BETAS,
        context_management=_edit(pause_after_compaction=True),
    )
    assert message.stop_reason == "compaction" and [b.type for b in message.content] == ["compaction"]
    assert [i.type for i in message.usage.iterations or []] == ["compaction"] and message.usage.output_tokens == 0
    assert len(live.recorded) == 1  # the compaction pass, no answer
    # the documented next step: the block as an assistant message (the rest of the session dropped)
    block = message.content[0].model_dump(exclude_none=True)
    sent_back: list[Any] = [*SESSION, {"role": "assistant", "content": [block]}]
    follow = client.beta.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=sent_back,
        betas=BETAS,
        context_management=_edit(),
    )
    (answer,) = follow.content
    assert answer.type == "text" and answer.text == "Continuing from the summary."
    assert [m["content"] for m in live.recorded[-1]["messages"]] == [summary_preamble(NOTE)]


def test_streamed_the_block_comes_whole_in_one_delta_then_the_answer(
    client: anthropic.Anthropic, live: LiveServer
) -> None:
    with client.beta.messages.stream(
        model=MODEL, max_tokens=512, messages=SESSION, betas=BETAS, context_management=_edit()
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e for e in events if e.type == "content_block_delta" and e.delta.type == "compaction_delta"]
    (delta,) = deltas
    assert delta.index == 0 and delta.delta.type == "compaction_delta" and delta.delta.content == NOTE
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert starts[0].type == "compaction" and starts[0].content is None
    compaction, text = final.content
    assert compaction.type == "compaction" and compaction.content == NOTE and text.type == "text"
    assert [i.type for i in final.usage.iterations or []] == ["compaction", "message"]


def test_streamed_and_paused_the_stream_stops_with_the_compaction_stop_reason(client: anthropic.Anthropic) -> None:
    with client.beta.messages.stream(
        model=MODEL,
        max_tokens=512,
        messages=SESSION,
        betas=BETAS,
        context_management=_edit(pause_after_compaction=True),
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "compaction" and [b.type for b in final.content] == ["compaction"]


def test_under_the_trigger_nothing_is_compacted(client: anthropic.Anthropic, live: LiveServer) -> None:
    edit: Any = {"edits": [{"type": "compact_20260112"}]}  # the API's default trigger: 150,000 input tokens
    message = client.beta.messages.create(
        model=MODEL, max_tokens=512, messages=SESSION, betas=BETAS, context_management=edit
    )
    assert [b.type for b in message.content] == ["text"] and message.usage.iterations is None
    assert message.context_management is not None and message.context_management.applied_edits == []
    assert len(live.recorded) == 1


def test_a_compaction_block_sent_back_replaces_everything_before_it(
    client: anthropic.Anthropic, live: LiveServer
) -> None:
    messages: list[Any] = [
        *SESSION,
        {"role": "assistant", "content": [{"type": "compaction", "content": NOTE}, {"type": "text", "text": "Done."}]},
        {"role": "user", "content": "What next?"},
    ]
    client.beta.messages.create(model=MODEL, max_tokens=512, system="Be brief.", messages=messages, betas=BETAS)
    recorded = live.recorded[-1]
    assert recorded["system"] == "Be brief."
    assert [(m["role"], m["content"]) for m in recorded["messages"]] == [
        ("user", summary_preamble(NOTE)),
        ("assistant", "Done."),
        ("user", "What next?"),
    ]


def test_a_null_compaction_block_is_a_no_op(client: anthropic.Anthropic, live: LiveServer) -> None:
    messages: list[Any] = [
        SESSION[0],
        {"role": "assistant", "content": [{"type": "compaction", "content": None}, {"type": "text", "text": "Ok."}]},
        {"role": "user", "content": "Go on."},
    ]
    client.beta.messages.create(model=MODEL, max_tokens=512, messages=messages, betas=BETAS)
    assert [m["content"] for m in live.recorded[-1]["messages"]] == [SESSION[0]["content"], "Ok.", "Go on."]


def test_custom_instructions_replace_the_handover_ask(client: anthropic.Anthropic, live: LiveServer) -> None:
    message = client.beta.messages.create(
        model=MODEL,
        max_tokens=512,
        messages=SESSION,
        betas=BETAS,
        context_management=_edit(instructions="Summarize it as a haiku.", pause_after_compaction=True),
    )
    (compaction,) = message.content
    assert compaction.type == "compaction" and compaction.content == "old pond, frog jumps in"
    assert live.recorded[0]["messages"][-1]["content"] == "Summarize it as a haiku."


def test_the_pass_after_a_turn_comes_from_the_prompt_cache(client: anthropic.Anthropic, live: LiveServer) -> None:
    """Right after a turn, the compaction pass reads the same prompt plus the reply and the ask."""
    long: list[Any] = [
        {"role": role, "content": f"{role} {i}: " + " ".join(f"w{i}x{j}" for j in range(80))}
        for i in range(20)
        for role in ("user", "assistant")
    ][:-1]
    reply = client.beta.messages.create(model=MODEL, max_tokens=512, messages=long, betas=BETAS)
    (text,) = reply.content
    assert text.type == "text"
    after: list[Any] = [*long, {"role": "assistant", "content": text.text}, {"role": "user", "content": "Next?"}]
    message = client.beta.messages.create(
        model=MODEL, max_tokens=512, messages=after, betas=BETAS, context_management=_edit(pause_after_compaction=True)
    )
    (passes,) = message.usage.iterations or []
    assert passes.cache_read_input_tokens / (passes.input_tokens + passes.cache_read_input_tokens) >= 0.9
