"""``Job``'s loop policy (``engine/loops.py``), through an ``Engine`` on the scripted backend.

A generation without a cap of its own that falls into a verbatim cycle ends as if the cap were hit
(``Finished("length")``), leaves the device at once, and logs one warning; one with its own cap runs
on; a reply that only says a short thing three times is no loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tinytitan.engine.events import TextDelta
from tinytitan.engine.loops import LoopGuard
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ChatRequest, Message
from tinytitan.engine.service import Engine
from tinytitan.testing.scripts import STUB_MODEL, script

WINDOW = 8192
SENTENCE = "Once more the keeper lit the lamp, and once more the storm came in from the sea at night. "
PARAGRAPH = SENTENCE * 3
LOOPING = PARAGRAPH * 30


@pytest.fixture
def engine() -> Iterator[Engine]:
    rules: list[dict[str, Any]] = [
        {"when": {"user_contains": "refrain"}, "reply": {"text": "La la la. " * 12 + "The end."}},
        {
            "when": {"user_contains": "save"},
            "reply": {"tool_calls": [{"name": "save", "arguments": {"v": "x" * 6000}}]},
        },
        {"reply": {"text": LOOPING}},
    ]
    made = Engine(StubBackend(script(*rules, context_window=WINDOW)), queue_limit=4)
    yield made
    made.shutdown()


def ask(text: str, **fields: Any) -> ChatRequest:
    return ChatRequest(model=STUB_MODEL, messages=(Message("user", text),), **fields)


def test_a_looping_generation_without_its_own_cap_ends_as_if_the_cap_were_hit(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        with caplog.at_level(logging.WARNING, logger="tinytitan.engine"):
            result = await engine.complete(ask("Write a long story."))
        assert result.finished.reason == "length"
        assert LOOPING.startswith(result.text) and 600 <= len(result.text) < len(LOOPING) / 4  # a 600-char cycle
        text = "".join(e.text for e in result.events if isinstance(e, TextDelta))
        assert text == result.text  # what was streamed is the model's text, unaltered
        assert result.finished.usage.completion_tokens > 0
        assert engine.queue.running == 0  # the row left the device; the slot is free
        warnings = [r.getMessage() for r in caplog.records if "verbatim" in r.getMessage()]
        assert len(warnings) == 1 and "finish reason length" in warnings[0]

    asyncio.run(main())


def test_a_cap_of_its_own_below_the_window_is_never_cut(engine: Engine) -> None:
    async def main() -> None:
        result = await engine.complete(ask("Write a long story.", max_tokens=WINDOW - 100))
        assert (result.text, result.finished.reason) == (LOOPING, "stop")
        clamped = await engine.complete(ask("Write a long story.", max_tokens=32000))  # = the window's
        assert clamped.finished.reason == "length" and len(clamped.text) < len(LOOPING) / 4

    asyncio.run(main())


def test_a_short_refrain_is_no_loop(engine: Engine) -> None:
    async def main() -> None:
        result = await engine.complete(ask("Sing a refrain."))
        assert result.finished.reason == "stop" and result.text.endswith("The end.")

    asyncio.run(main())


def test_a_tool_calls_long_repetitive_arguments_are_data_not_a_loop(engine: Engine) -> None:
    from tinytitan.engine.request import Tool

    async def main() -> None:
        tools = (Tool("save", parameters={"type": "object", "properties": {"v": {"type": "string"}}}),)
        result = await engine.complete(ask("save this", tools=tools))
        assert result.finished.reason == "tool_calls"
        (call,) = result.tool_calls
        assert call.arguments == '{"v": "' + "x" * 6000 + '"}'

    asyncio.run(main())


def test_the_guard_is_only_for_requests_without_a_cap_of_their_own() -> None:
    assert LoopGuard.for_request("r", WINDOW, WINDOW) is not None
    assert LoopGuard.for_request("r", WINDOW - 1, WINDOW) is None
    guard = LoopGuard("r")
    assert not guard.feed("")
    fired = [guard.feed(piece) for piece in [PARAGRAPH[i : i + 40] for i in range(0, len(PARAGRAPH), 40)] * 4]
    assert fired[-1] and guard.cycle is not None and guard.cycle.period == len(SENTENCE)
