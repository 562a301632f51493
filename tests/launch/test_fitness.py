"""What ``launch`` says about the model before the agent starts (issue 39.5): one line each when the
model cannot call tools or its window is small, a refusal where the agent's first prompt cannot fit."""

from __future__ import annotations

import pytest

from tinytitan.launch.fitness import fitness
from tinytitan.launch.server import Served

EMBEDDED = Served("http://127.0.0.1:9", "smollm2", 8192, 2048, None, (), tool_calls=False)  # the embedded model


def test_the_embedded_model_with_claude_code_is_refused_and_says_why() -> None:
    told = fitness("claude", EMBEDDED)
    assert told.refusal is not None and "8,192" in told.refusal and "Claude Code" in told.refusal
    (line,) = told.warnings
    assert line.startswith("smollm2 cannot call tools") and "cannot read, run or edit files" in line


@pytest.mark.parametrize("agent", ["codex", "opencode", "pi"])
def test_agents_whose_prompt_fits_are_warned_not_refused(agent: str) -> None:
    told = fitness(agent, EMBEDDED)
    assert told.refusal is None
    assert [line.split(" ", 2)[1] for line in told.warnings] == ["cannot", "context"]  # no tools; a small window


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode"])
def test_a_tool_model_needs_room_for_the_tools_too(agent: str) -> None:
    told = fitness(agent, Served("http://h", "m", 8192, 2048, None, (), tool_calls=True))
    assert told.refusal is not None and told.warnings == ()


def test_claude_code_below_100k_is_told_when_it_compacts() -> None:
    (line,) = fitness("claude", Served("http://h", "m", 65536, 16384, None, (), tool_calls=True)).warnings
    assert "compacts on its own only from 100,000 tokens" in line


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "pi"])
def test_a_large_tool_model_is_said_nothing_about(agent: str) -> None:
    told = fitness(agent, Served("http://h", "m", 131072, 32000, None, (), tool_calls=True))
    assert (told.warnings, told.refusal) == ((), None)
