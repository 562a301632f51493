"""What ``tinytitan launch`` says about the model before an agent starts (issue 39.5).

A coding agent works on files through tool calls, and its own prompt — instructions, and the tool
list when the model can call tools — is thousands of tokens before the user says anything. So before
the agent runs, one line each says when:

- the model has no tool-call syntax: the agent cannot read, run or edit anything with it, only talk
  (a small model then invents file listings instead);
- the window is below what the agent needs for a working session (64k; Claude Code compacts on its
  own only from a 100,000-token window, below that only when the server refuses a prompt as too long).

And where the agent cannot work at all — its first prompt alone does not fit the window, so every
request would be refused — the launch refuses, unless ``--force``. The first-prompt sizes are
measured (the agents' first requests as they send them, read by a small model's tokenizer), rounded
up to leave room for an answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytitan.launch.server import Served

__all__ = ["NEEDED_WINDOW", "Fitness", "fitness"]

NEEDED_WINDOW = 65_536  # a window for a working session (the README's "64k or more")
_CLAUDE_COMPACTS_FROM = 100_000
_TITLES = {"claude": "Claude Code", "codex": "Codex", "pi": "pi", "opencode": "OpenCode"}
# the window an agent's first request needs, with tools in the prompt and without (measured: Claude
# Code's is ~8,200 tokens without tools and ~24k with them; Codex's and OpenCode's ~6k / ~9k; pi's ~1.6k)
_FIRST_PROMPT = {
    "claude": (32_768, 16_384),
    "codex": (16_384, 8_192),
    "opencode": (16_384, 8_192),
    "pi": (4_096, 4_096),
}


@dataclass(frozen=True, slots=True)
class Fitness:
    warnings: tuple[str, ...]  # one line each, said before the agent starts
    refusal: str | None  # why the agent cannot work at all (None: it can)


def fitness(agent: str, served: Served) -> Fitness:
    title = _TITLES.get(agent, agent)
    model, window = served.model, served.context_window
    warnings: list[str] = []
    if served.tool_calls is False:
        warnings.append(
            f"{model} cannot call tools (it has no tool-call syntax): {title} cannot read, run or edit files "
            "with it, only talk"
        )
    with_tools, without = _FIRST_PROMPT.get(agent, (0, 0))
    needed = without if served.tool_calls is False else with_tools
    if window < needed:
        refusal = (
            f"{model}'s context window ({window:,} tokens) is smaller than {title}'s own first prompt needs "
            f"(about {needed:,}): every request would be refused; serve a model with a larger window"
        )
        return Fitness(tuple(warnings), refusal)
    if agent == "claude" and window < _CLAUDE_COMPACTS_FROM:
        warnings.append(
            f"{model}'s context window is {window:,} tokens: Claude Code compacts on its own only from "
            f"{_CLAUDE_COMPACTS_FROM:,} tokens, below that only when the server refuses a prompt as too long"
        )
    elif window < NEEDED_WINDOW:
        warnings.append(
            f"{model}'s context window is {window:,} tokens: {title} needs {NEEDED_WINDOW:,} or more for a "
            "working session (it compacts early and often below that)"
        )
    return Fitness(tuple(warnings), None)
