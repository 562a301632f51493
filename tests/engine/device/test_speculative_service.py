"""Drafts through the Engine (Job detokenizes and parses a multi-token step one token at a time):
text, stop strings, caps and usage exactly as without drafts; structured output and a forced call
(grammar-masked rows, which step plainly) the same too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.job import Completion
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import (
    ChatRequest,
    FormatRequest,
    Message,
    ReasoningControls,
    Sampling,
    Tool,
    ToolChoice,
)
from tinytitan.engine.service import Engine
from tinytitan.testing.loop import run

GREEDY = Sampling(temperature=0.0)
LOOPED = "one two three four five six seven " * 6 + "one two three"


@pytest.fixture(scope="module")
def engines(tiny_dir: Path) -> Iterator[tuple[Engine, Engine]]:
    plain = Engine(MlxBackend(str(tiny_dir), prompt_cache_entries=0, drafts=False))
    drafted = Engine(MlxBackend(str(tiny_dir), prompt_cache_entries=0, drafts=True))
    yield plain, drafted
    plain.shutdown()
    drafted.shutdown()


def complete(engine: Engine, **kw: Any) -> Completion:
    request = ChatRequest(
        model=engine.info.id,
        messages=(Message("user", LOOPED),),
        reasoning=ReasoningControls(enable_thinking=False),
        **{"sampling": GREEDY, **kw},
    )
    return run(engine.complete(request))


def test_same_text_usage_and_cap(engines: tuple[Engine, Engine]) -> None:
    plain, drafted = engines
    for n in (1, 7, 48):
        a, b = complete(plain, max_tokens=n), complete(drafted, max_tokens=n)
        assert b.text == a.text and b.finished.reason == a.finished.reason
        assert b.finished.usage == a.finished.usage
        assert a.finished.usage is not None and a.finished.usage.completion_tokens <= n
    backend = drafted.backend
    assert isinstance(backend, MlxBackend) and backend.batch is not None
    assert backend.batch.speculator is not None and backend.batch.speculator.proposed > 0


def test_a_stop_string_inside_a_multi_token_step(engines: tuple[Engine, Engine]) -> None:
    plain, drafted = engines
    full = complete(plain, max_tokens=48).text
    assert len(full) > 20
    for at in (len(full) // 2, 2 * len(full) // 3, len(full) - 4):
        stop = full[at : at + 3]
        a, b = complete(plain, max_tokens=48, stop=(stop,)), complete(drafted, max_tokens=48, stop=(stop,))
        assert b.text == a.text == full[: full.index(stop)]
        assert b.finished.reason == a.finished.reason == "stop" and b.finished.stop_sequence == stop
        assert b.finished.usage == a.finished.usage


def test_seeded_sampled_text_is_the_same(engines: tuple[Engine, Engine]) -> None:
    plain, drafted = engines
    backend = drafted.backend
    assert isinstance(backend, MlxBackend) and backend.batch is not None and backend.batch.speculator is not None
    before = backend.batch.speculator.proposed
    for seed in (1, 2, 3):
        sampling = Sampling(temperature=0.3, top_p=0.9, seed=seed)
        a, b = complete(plain, max_tokens=40, sampling=sampling), complete(drafted, max_tokens=40, sampling=sampling)
        assert b.text == a.text and b.finished.usage == a.finished.usage
    assert backend.batch.speculator.proposed > before


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "rank": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["city", "rank"],
    "additionalProperties": False,
}


def test_structured_output_and_a_forced_call_are_the_same(engines: tuple[Engine, Engine]) -> None:
    """Rows with a grammar mask step plainly whatever the setting: the same document, the same call."""
    plain, drafted = engines
    fmt = FormatRequest("json_schema", "response_format", "response_format.json_schema.schema", SCHEMA, "c")
    a, b = complete(plain, max_tokens=60, output_format=fmt), complete(drafted, max_tokens=60, output_format=fmt)
    assert b.text == a.text and b.finished.usage == a.finished.usage
    assert set(json.loads(a.text)) == {"city", "rank"}
    weather = Tool("weather", "The weather in a city.", SCHEMA)
    forced = {"tools": (weather,), "tool_choice": ToolChoice("function", "weather"), "max_tokens": 60}
    a, b = complete(plain, **forced), complete(drafted, **forced)
    assert [(c.name, c.arguments) for c in b.tool_calls] == [(c.name, c.arguments) for c in a.tool_calls]
    assert [c.name for c in a.tool_calls] == ["weather"]
