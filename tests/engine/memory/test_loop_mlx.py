"""The memory loop on the real MLX engine path (the tiny random model).

A random model never calls a tool by itself, so round 1 runs for real and then reports one scripted
``memory_set`` call; everything after — running the call, rendering the tool turns through the
model's own chat template, the second real generation and its prompt-cache hit — is the real path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tinytitan.engine.build import build_engine
from tinytitan.engine.events import Event, Finished, ToolCall
from tinytitan.engine.job import Job
from tinytitan.engine.models.base import Generation
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings
from tinytitan.testing.loop import run

from .support import store_of


@pytest.fixture()
def engine(tiny_dir: Path, tmp_path: Path) -> Iterator[Engine]:
    settings = Settings(memory=True, memory_dir=str(tmp_path / "memory"), launch_dir=str(tmp_path / "launch"))
    eng = build_engine(settings, MlxBackend(str(tiny_dir)))
    yield eng
    eng.shutdown()


def test_a_memory_round_renders_through_the_real_template_and_reuses_the_prefix(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    rounds: list[Generation] = []
    real = Job._generate

    async def first_round_calls_memory(self: Job, gen: Generation) -> AsyncIterator[Event]:
        rounds.append(gen)
        if len(rounds) == 1:
            gen.max_new = 4  # leave room under the cap for the second round
        async for event in real(self, gen):
            if isinstance(event, Finished):
                if len(rounds) == 1:  # what the model "said": one memory call
                    yield ToolCall("call_1", "memory_set", '{"key": "project/lang", "value": "Python 3.12"}')
                yield event
            elif len(rounds) > 1:
                yield event

    monkeypatch.setattr(Job, "_generate", first_round_calls_memory)
    request = ChatRequest(
        model=engine.info.id,
        messages=(Message("user", "remember that we use Python 3.12"),),
        max_tokens=10,
        reasoning=ReasoningControls(enable_thinking=False),
        workspace="/projects/proj",
    )
    result = run(engine.complete(request))
    assert len(rounds) == 2 and result.tool_calls == []
    first, second = rounds
    assert "# Memory" in first.prompt.text and "memory_set" in first.prompt.text  # fragment and tools rendered
    assert second.prompt.text.startswith(first.prompt.text.rsplit("<|im_start|>assistant", 1)[0])
    assert '"saved": "project/lang"' in second.prompt.text  # the tool result, in the model's own template
    usage = result.finished.usage
    assert usage.prompt_tokens == first.prompt.n_tokens + second.prompt.n_tokens
    assert usage.completion_tokens <= 10
    assert second.cached_tokens > 0  # the second round reuses the first round's KV prefix
    store = store_of(engine, second.request)
    assert store.get("project/lang") is not None
