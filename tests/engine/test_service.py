"""The Engine facade: ``join`` waits for the generation thread after ``shutdown``."""

from __future__ import annotations

import asyncio
import contextlib

from tinytitan.engine.backends.stub import StubBackend
from tinytitan.engine.request import ChatRequest, Message
from tinytitan.engine.service import Engine
from tinytitan.testing.scripts import STUB_MODEL, script


def test_join_reports_a_busy_generation_thread_until_the_job_is_cancelled() -> None:
    engine = Engine(StubBackend(script({"reply": {"text": "a b c", "chunk_delay_ms": 60_000}})))

    async def run() -> None:
        job = await engine.prepare(ChatRequest(model=STUB_MODEL, messages=(Message("user", "hi"),)))
        events = job.events()
        task = asyncio.ensure_future(anext(events))
        while not engine.backend.recorded:  # the generation thread is in the scripted wait
            await asyncio.sleep(0.01)
        engine.shutdown()
        assert engine.join(timeout=0) is False
        task.cancel()  # the client goes away: the job is cancelled within a token
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert engine.join(timeout=30) is True
