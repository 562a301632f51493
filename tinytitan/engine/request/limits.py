"""Size limits on what a request may ask for, shared by the validator and the output-format parser,
and the one rule for how many tokens a generation may produce (``output_budget``).

A JSON schema (a tool's parameters, a structured-output schema) is walked and compiled by code that
recurses; bounding its nesting keeps a hostile schema a 400 instead of a stack overflow.
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.errors import InvalidRequest

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "MAX_TOOLS",
    "PLANNING_CAP",
    "check_schema_depth",
    "output_budget",
    "planning_cap",
    "schema_depth",
]

MAX_TOOLS = 512
MAX_SCHEMA_DEPTH = 64  # nesting of objects/arrays in a JSON schema ({} is depth 1)


PLANNING_CAP = 32_000  # what Claude Code asks for by default


def planning_cap(window: int) -> int:
    """The output cap a model listing publishes (``max_output_tokens``, Anthropic's ``max_tokens``,
    Codex's catalog): a quarter of the window, at most 32,000 tokens — a number a client plans its
    compaction with (the window less it is the prompt's room), not a limit the server enforces: a
    request may still ask for up to the window."""
    return max(1, min(PLANNING_CAP, window // 4))


def output_budget(cap: int, window: int, prompt_tokens: int, used: int = 0) -> int:
    """How many tokens a generation may produce: what the output cap leaves after ``used`` (earlier
    rounds of the same request), and what the context window leaves after the prompt. At most 0: none."""
    return min(cap - used, window - prompt_tokens)


def schema_depth(value: Any, *, stop_after: int = MAX_SCHEMA_DEPTH) -> int:
    """Nesting depth of JSON containers, walked without recursion (stops counting past ``stop_after``)."""
    depth = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        depth = max(depth, level)
        if depth > stop_after:
            break
        stack.extend((child, level + 1) for child in children)
    return depth


def check_schema_depth(schema: Any, param: str) -> None:
    """400 ``value_too_large`` naming ``param`` when ``schema`` nests deeper than the limit."""
    if schema_depth(schema) > MAX_SCHEMA_DEPTH:
        raise InvalidRequest(
            f"the JSON schema is nested more than {MAX_SCHEMA_DEPTH} levels deep",
            param=param,
            code="value_too_large",
        )
