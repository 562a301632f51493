"""Size limits on what a request may ask for, shared by the validator and the output-format parser,
and the one rule for how many tokens a generation may produce (``output_budget``).

A JSON schema (a tool's parameters, a structured-output schema) is walked and compiled by code that
recurses; bounding its nesting keeps a hostile schema a 400 instead of a stack overflow.
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.errors import InvalidRequest

__all__ = ["MAX_SCHEMA_DEPTH", "MAX_TOOLS", "check_schema_depth", "output_budget", "schema_depth"]

MAX_TOOLS = 512
MAX_SCHEMA_DEPTH = 64  # nesting of objects/arrays in a JSON schema ({} is depth 1)


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
