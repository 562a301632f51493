"""A job's inbox (``engine/inbox.py``): a reader that lags behind the device reads several steps at
once and gets the same text in fewer events; one that keeps up gets one group, unchanged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.inbox import Inbox, joined
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls
from tinytitan.engine.service import Engine
from tinytitan.testing.scripts import STUB_MODEL, script

TEXT = " ".join(f"word{i}." for i in range(40))
REASONING = " ".join(f"thought{i}" for i in range(30))


def test_joined_merges_text_across_outputs_only() -> None:
    call = ToolCall("c1", "save", "{}")
    groups: list[list[Event]] = [
        [ReasoningDelta("a")],
        [ReasoningDelta("b"), TextDelta("c")],
        [TextDelta("d"), TextDelta("e")],  # within one output: kept apart, as the parser gave them
        [call],
        [TextDelta("f")],
    ]
    assert joined(groups) == [ReasoningDelta("ab"), TextDelta("cd"), TextDelta("e"), call, TextDelta("f")]
    assert joined([[TextDelta("x"), TextDelta("y")]]) == [TextDelta("x"), TextDelta("y")]  # one output: as it was


def test_take_returns_everything_in_order_after_the_first() -> None:
    async def main() -> None:
        inbox = Inbox()
        waiting = asyncio.ensure_future(inbox.take())
        await asyncio.sleep(0)
        assert not waiting.done()
        error = RuntimeError("x")
        inbox.put(error)
        assert await waiting == [error]
        for n in range(3):
            inbox.put(RuntimeError(str(n)))
        assert [str(e) for e in await inbox.take()] == ["0", "1", "2"]

    asyncio.run(main())


@pytest.fixture
def engine() -> Iterator[Engine]:
    made = Engine(StubBackend(script({"reply": {"reasoning": REASONING, "text": TEXT}})), queue_limit=4)
    yield made
    made.shutdown()


def ask() -> ChatRequest:
    return ChatRequest(
        model=STUB_MODEL,
        messages=(Message("user", "Tell me."),),
        reasoning=ReasoningControls(enable_thinking=True),
        stream=True,
    )


def _kinds(events: list[Event]) -> list[str]:
    """The event kinds in order, a run of one kind counted once (what a client's shapes depend on)."""
    kinds: list[str] = []
    for event in events:
        if not kinds or kinds[-1] != type(event).__name__:
            kinds.append(type(event).__name__)
    return kinds


def _text(events: list[Event], kind: type[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def test_a_lagging_reader_gets_the_same_text_in_fewer_events(engine: Engine) -> None:
    async def keeping_up() -> list[Event]:
        return (await engine.complete(ask())).events

    async def lagging() -> list[Event]:
        job = await engine.prepare(ask())
        got: list[Event] = []
        async for event in job.events():
            got.append(event)
            if len(got) == 1:  # the loop is held up (a busy host) until the device has done every step
                row = job._row
                assert row is not None
                deadline = time.monotonic() + 60
                while not row.ended:
                    assert time.monotonic() < deadline, "the row never ended"
                    time.sleep(0.002)
        return got

    steady = asyncio.run(keeping_up())
    behind = asyncio.run(lagging())
    for kind in (ReasoningDelta, TextDelta):
        assert _text(behind, kind) == _text(steady, kind)
    assert _text(behind, TextDelta) == TEXT and _text(behind, ReasoningDelta).strip() == REASONING
    assert _kinds(behind) == _kinds(steady) == ["ReasoningDelta", "TextDelta", "Finished"]
    done, same = behind[-1], steady[-1]
    assert isinstance(done, Finished) and isinstance(same, Finished) and done.usage and same.usage
    assert (done.reason, done.usage.completion_tokens, done.usage.reasoning_tokens) == (
        same.reason,
        same.usage.completion_tokens,
        same.usage.reasoning_tokens,
    )  # counted token by token either way
    # everything after the first event came in one read: at most one reasoning delta and one text
    # delta more (one event per output would be one per token: over 100)
    assert len(behind) <= 4 and done.usage.completion_tokens > 100
