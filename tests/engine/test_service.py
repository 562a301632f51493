"""The Engine facade and its Job on the scripted backend: refusals before a slot, the event order,
and a slot that is freed however a job ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.errors import (
    ContextLengthExceeded,
    GenerationFailed,
    InvalidRequest,
    QueueFull,
    ShuttingDown,
    UnknownModel,
    Unsupported,
)
from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.models.stub import StubBackend, stub_tokens
from tinytitan.engine.request import ChatRequest, Message, Tool
from tinytitan.engine.service import Engine
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.waiting import wait_until_async

TOOL_REPLY = {"reasoning": "Look it up.", "text": "Calling.", "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}]}
SLOW = {"text": " ".join(["word"] * 50), "chunk_delay_ms": 20}
RULES = (
    {"when": {"user_contains": "tool"}, "reply": TOOL_REPLY},
    {"when": {"user_contains": "slow"}, "reply": SLOW},
    {"when": {"user_contains": "fail"}, "reply": {"text": "one two three four", "fail_after_events": 2}},
    {"reply": {"text": "alpha beta gamma STOP delta"}},
)


class MakeEngine(Protocol):
    def __call__(self, *, queue_limit: int = 4, **extra: Any) -> Engine: ...


@pytest.fixture
def make_engine() -> Iterator[MakeEngine]:
    engines: list[Engine] = []

    def make(*, queue_limit: int = 4, **extra: Any) -> Engine:
        engine = Engine(StubBackend(script(*RULES, **extra)), queue_limit=queue_limit)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.shutdown()


def ask(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(model=STUB_MODEL, messages=(Message("user", text),), **fields)


def idle(engine: Engine) -> bool:
    return engine.queue.running == 0 and engine.queue.waiting == 0


# -- prepare: every refusal before a slot is taken ------------------------------------------------


def test_prepare_validates_renders_and_admits(make_engine: MakeEngine) -> None:
    engine = make_engine(context_window=256)

    async def main() -> None:
        job = await engine.prepare(ask(max_tokens=5))
        assert engine.queue.waiting == 1  # admitted, not yet running
        assert job.request.model_id == STUB_MODEL and job.request.cap == 5
        assert job.generation.max_new == 5
        unbounded = await engine.prepare(ask())
        prompt = unbounded.generation.prompt
        assert prompt.n_tokens == len(stub_tokens(prompt.text))
        assert unbounded.generation.max_new == 256 - prompt.n_tokens  # min(cap, context - prompt)
        job.close()
        unbounded.close()
        assert idle(engine)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (ChatRequest(model="gpt-5", messages=(Message("user", "hi"),)), UnknownModel),
        (ChatRequest(model=STUB_MODEL, messages=()), InvalidRequest),
        (ask(tools=(Tool("bad name"),)), InvalidRequest),
    ],
    ids=["unknown model", "no messages", "a bad tool"],
)
def test_a_refused_request_takes_no_slot(
    make_engine: MakeEngine, request_: ChatRequest, error: type[Exception]
) -> None:
    engine = make_engine(queue_limit=0)

    async def main() -> None:
        with pytest.raises(error):
            await engine.prepare(request_)
        assert idle(engine)
        (await engine.prepare(ask())).close()  # the one slot is still there

    asyncio.run(main())


@pytest.mark.parametrize("messages_param", ["messages", "input"])
def test_a_prompt_over_the_context_is_context_length_exceeded(make_engine: MakeEngine, messages_param: str) -> None:
    engine = make_engine(context_window=16)

    async def main() -> None:
        with pytest.raises(ContextLengthExceeded) as info:
            await engine.prepare(ask("many words " * 20, messages_param=messages_param))
        error = info.value
        assert (error.param, error.code, error.status) == (messages_param, "context_length_exceeded", 400)
        assert "the context window is 16" in error.message
        assert idle(engine)

    asyncio.run(main())


def test_a_full_queue_refuses_at_once_and_admits_again_when_a_job_leaves(make_engine: MakeEngine) -> None:
    engine = make_engine(queue_limit=1)  # one slot + one waiting

    async def main() -> None:
        first, second = await engine.prepare(ask()), await engine.prepare(ask())
        with pytest.raises(QueueFull) as info:
            await engine.prepare(ask())
        assert info.value.retry_after >= 1
        first.close()
        third = await engine.prepare(ask())
        second.close()
        third.close()
        assert idle(engine)

    asyncio.run(main())


# -- count_tokens and the model facts ------------------------------------------------------------


def test_count_tokens_is_the_rendered_prompt(make_engine: MakeEngine) -> None:
    engine = make_engine()

    async def main() -> None:
        count = await engine.count_tokens(ask())
        _validated, prompt = await engine.validate(ask())
        assert count == prompt.n_tokens > 0
        assert idle(engine)  # counting takes no slot

    asyncio.run(main())


def test_without_a_tokenizer_only_count_tokens_is_unsupported(make_engine: MakeEngine) -> None:
    engine = make_engine(tokenizer=False)

    async def main() -> None:
        with pytest.raises(Unsupported) as info:
            await engine.count_tokens(ask())
        assert info.value.status == 501
        await engine.validate(ask())
        result = await engine.complete(ask())
        assert result.text == "alpha beta gamma STOP delta"

    asyncio.run(main())


def test_model_facts(make_engine: MakeEngine) -> None:
    engine = make_engine()
    assert engine.model_ids() == [STUB_MODEL]
    assert engine.accepts(STUB_MODEL) and engine.accepts(f"{STUB_MODEL}-fast") and not engine.accepts("gpt-5")
    assert engine.info.default_reasoning == "on"
    engine.default_reasoning = "off"
    assert engine.info.default_reasoning == "off"


# -- a job's events --------------------------------------------------------------------------------


def test_collect_joins_the_events_and_keeps_them_in_order(make_engine: MakeEngine) -> None:
    engine = make_engine()
    tools = (Tool("lookup", parameters={"type": "object", "properties": {"q": {"type": "integer"}}}),)

    async def main() -> None:
        result = await engine.complete(ask("use the tool", tools=tools))
        assert (result.reasoning, result.text.strip()) == ("Look it up.", "Calling.")
        (call,) = result.tool_calls
        assert (call.name, call.arguments) == ("lookup", '{"q": 1}')
        kinds = [type(e) for e in result.events]
        first_text = kinds.index(TextDelta)
        assert set(kinds[:first_text]) == {ReasoningDelta}
        assert kinds[-2:] == [ToolCall, Finished] and kinds.count(Finished) == 1
        assert "".join(e.text for e in result.events if isinstance(e, TextDelta)) == result.text
        assert result.finished is result.events[-1] and result.finished.reason == "tool_calls"
        usage = result.finished.usage
        assert usage.completion_tokens > usage.reasoning_tokens > 0 and usage.prompt_tokens > 0
        await wait_until_async(lambda: idle(engine))  # freed when the worker stops

    asyncio.run(main())


def test_events_end_with_one_finished_and_free_the_slot(make_engine: MakeEngine) -> None:
    engine = make_engine()

    async def main() -> None:
        job = await engine.prepare(ask())
        events = [e async for e in job.events()]
        # one delta per token while the loop keeps up; fewer, the same text, when it lags (inbox.py)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "alpha beta gamma STOP delta"
        assert isinstance(events[-1], Finished) and events[-1].reason == "stop"
        assert [e for e in events if isinstance(e, Finished)] == [events[-1]]
        await wait_until_async(lambda: idle(engine))  # freed when the worker stops

    asyncio.run(main())


def test_the_cap_and_stop_strings_end_a_generation(make_engine: MakeEngine) -> None:
    engine = make_engine()

    async def main() -> None:
        capped = await engine.complete(ask(max_tokens=2))
        assert (capped.text, capped.finished.reason, capped.finished.usage.completion_tokens) == (
            "alpha beta",
            "length",
            2,
        )
        stopped = await engine.complete(ask(stop=(" STOP",)))
        assert (stopped.text, stopped.finished.reason, stopped.finished.stop_sequence) == (
            "alpha beta gamma",
            "stop",
            " STOP",
        )

    asyncio.run(main())


def test_a_failure_mid_generation_raises_from_events_and_frees_the_slot(make_engine: MakeEngine) -> None:
    engine = make_engine()

    async def main() -> None:
        job = await engine.prepare(ask("fail please"))
        seen: list[Any] = []
        with pytest.raises(GenerationFailed):
            async for event in job.events():
                seen.append(event)
        assert "".join(e.text for e in seen) == "one two"  # the events before the failure (fewer when lagging)
        await wait_until_async(lambda: idle(engine))  # freed when the worker stops
        assert (await engine.complete(ask())).finished.reason == "stop"

    asyncio.run(main())


# -- closing: a job never keeps its slot after its request is over --------------------------------


def test_a_cancelled_job_frees_its_slot_for_the_next(make_engine: MakeEngine) -> None:
    engine = make_engine(queue_limit=1)

    async def main() -> None:
        running = await engine.prepare(ask("slow please"))
        events = running.events()
        assert isinstance(await anext(events), TextDelta)  # generating
        queued = await engine.prepare(ask())
        assert (engine.queue.running, engine.queue.waiting) == (1, 1)
        await events.aclose()  # the client went away
        assert running.cancelled
        result = await queued.collect()  # gets the slot once the worker has stopped
        assert result.text == "alpha beta gamma STOP delta"
        await wait_until_async(lambda: idle(engine))

    asyncio.run(main())


def test_close_before_events_frees_at_once_and_twice_is_harmless(make_engine: MakeEngine) -> None:
    engine = make_engine(queue_limit=0)

    async def main() -> None:
        job = await engine.prepare(ask())
        job.close()
        job.close()
        assert idle(engine)  # no worker ever ran: freed at once
        (await engine.prepare(ask())).close()
        assert idle(engine)

    asyncio.run(main())


def test_closed_on_error_closes_only_on_an_exception(make_engine: MakeEngine) -> None:
    engine = make_engine(queue_limit=1)

    async def main() -> None:
        failing = await engine.prepare(ask())
        with pytest.raises(RuntimeError), failing.closed_on_error() as job:
            assert job is failing
            raise RuntimeError("an encoder broke")
        assert failing.cancelled and engine.queue.waiting == 0
        handed_on = await engine.prepare(ask())
        with handed_on.closed_on_error():
            pass  # e.g. the stream went to a response, whose on_close will close it
        assert not handed_on.cancelled and engine.queue.waiting == 1
        handed_on.close()
        assert idle(engine)

    asyncio.run(main())


# -- shutdown ------------------------------------------------------------------------------------


class StuckBackend(StubBackend):
    """A step that ignores cancellation until ``release`` (a collective with a dead rank)."""

    def __init__(self) -> None:
        super().__init__(script({"reply": {"text": "never"}}))
        self.entered = threading.Event()
        self.release = threading.Event()

    def open_batch(self) -> Batch:
        return Stuck(self)


class Stuck(Batch):
    def __init__(self, backend: StuckBackend) -> None:
        self.backend = backend
        self.running: list[Row] = []

    @property
    def rows(self) -> int:
        return len(self.running)

    def add(self, row: Row) -> list[Output]:
        self.running.append(row)
        return []

    def remove(self, row: Row) -> None:
        self.running.remove(row)

    def step(self) -> list[Output]:
        self.backend.entered.set()
        self.backend.release.wait(60)
        ended, self.running = self.running, []
        return [Output(row, ["late"], finish="stop") for row in ended]


def test_stop_refuses_new_and_waiting_requests_and_ends_a_stuck_generation() -> None:
    backend = StuckBackend()
    engine = Engine(backend, queue_limit=2)

    async def main() -> None:
        running = await engine.prepare(ask())
        waiting = await engine.prepare(ask())
        events = running.events()
        first = asyncio.ensure_future(anext(events))
        waited = asyncio.ensure_future(waiting.collect())
        while not backend.entered.is_set():
            await asyncio.sleep(0.01)
        engine.stop(finish_within=0.05)
        with pytest.raises(ShuttingDown, match="shutting down"):
            await waited  # at once, without a slot
        with pytest.raises(ShuttingDown):
            await engine.prepare(ask())
        with pytest.raises(ShuttingDown) as ended:
            await first  # the generation thread is still stuck: the job ends without it
        assert ended.value.status == 503 and running.cancelled
        await events.aclose()
        assert not engine.jobs and idle(engine)  # the slot is free; the device drops the row after its step
        backend.release.set()

    try:
        asyncio.run(main())
    finally:
        backend.release.set()
        engine.shutdown()
    assert engine.join(timeout=30) is True


def test_a_generation_that_finishes_within_the_grace_is_answered_in_full(make_engine: MakeEngine) -> None:
    engine = make_engine()

    async def main() -> None:
        job = await engine.prepare(ask("slow please"))
        events = job.events()
        assert isinstance(await anext(events), TextDelta)
        engine.stop(finish_within=600)
        rest = [event async for event in events]
        assert isinstance(rest[-1], Finished) and rest[-1].reason == "stop"
        assert "".join(e.text for e in rest if isinstance(e, TextDelta)).count("word") == 49

    asyncio.run(main())


def test_shutdown_ends_a_waiting_generation_and_stops_the_device_thread() -> None:
    backend = StubBackend(script({"reply": {"text": "a b c", "chunk_delay_ms": 60_000}}))
    engine = Engine(backend)

    async def run() -> None:
        job = await engine.prepare(ask())
        events = job.events()
        task = asyncio.ensure_future(anext(events))
        while not backend.recorded:  # the row is on the device, waiting for its first chunk
            await asyncio.sleep(0.01)
        thread = engine.device.thread
        assert thread is not None and thread.is_alive()
        engine.shutdown()
        assert engine.join(timeout=0) is True and not thread.is_alive()
        with pytest.raises(ShuttingDown):
            await task

    asyncio.run(run())
