"""What a tool search finds among the deferred tools (issue 39).

A tool's searchable text is its name (also with ``_`` as spaces, and its namespace), its description,
and its arguments' names and descriptions, nested ones included — what Anthropic's tool search and
Codex's ``tool_search`` both read. ``regex``: a Python regular expression (``re.search``, at most 200
characters) over each of those fields; tools in the order the request lists them. ``bm25`` and
``openai``: Okapi BM25 (k1 1.2, b 0.75) of the query's words over each tool's words, best first, ties
in request order, only tools that share a word with the query. A search returns at most its
``limit`` tools (5 by default, 8 for ``openai`` as Codex's; never more than ``MAX_LIMIT``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from tinytitan.engine.request import Tool
from tinytitan.engine.request.deferred import pattern_problem

__all__ = ["MAX_LIMIT", "SearchError", "bm25_rank", "regex_matches", "search", "search_fields", "words"]

MAX_LIMIT = 20
_DEFAULT_LIMIT = {"regex": 5, "bm25": 5, "openai": 8}
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_K1, _B = 1.2, 0.75


class SearchError(ValueError):
    """The model's search arguments cannot be run: ``code`` (``invalid_tool_input``) and what was wrong."""

    def __init__(self, detail: str, code: str = "invalid_tool_input") -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _schema_fields(schema: Any) -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("description"), str):
        yield schema["description"]
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, inner in properties.items():
            yield str(name)
            yield from _schema_fields(inner)
    yield from _schema_fields(schema.get("items"))
    for variant in schema.get("anyOf") or schema.get("oneOf") or ():
        yield from _schema_fields(variant)


def search_fields(tool: Tool) -> list[str]:
    """The texts a search reads of ``tool``."""
    fields = [tool.name, tool.name.replace("_", " ")]
    if tool.namespace:
        fields.append(tool.namespace)
    if tool.description:
        fields.append(tool.description)
    fields.extend(_schema_fields(tool.parameters))
    return [f for f in fields if f.strip()]


def words(text: str) -> list[str]:
    """Lower-case words, split at camelCase, ``_``, digits and punctuation."""
    return [w.lower() for w in _WORD.findall(text)]


def regex_matches(tools: tuple[Tool, ...], pattern: str, limit: int) -> tuple[Tool, ...]:
    problem = pattern_problem(pattern)
    if problem is not None:
        raise SearchError(problem)
    compiled = re.compile(pattern)
    found = [t for t in tools if any(compiled.search(field) for field in search_fields(t))]
    return tuple(found[:limit])


def bm25_rank(tools: tuple[Tool, ...], query: str, limit: int) -> tuple[Tool, ...]:
    documents = [Counter(words(" ".join(search_fields(t)))) for t in tools]
    terms = set(words(query))
    if not documents or not terms:
        return ()
    average = sum(sum(d.values()) for d in documents) / len(documents) or 1.0
    frequency = {term: sum(1 for d in documents if term in d) for term in terms}
    n = len(documents)
    scored: list[tuple[float, int]] = []
    for i, document in enumerate(documents):
        length = sum(document.values())
        score = 0.0
        for term in terms:
            tf = document.get(term, 0)
            if not tf:
                continue
            idf = math.log((n - frequency[term] + 0.5) / (frequency[term] + 0.5) + 1.0)
            score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
        if score > 0:
            scored.append((-score, i))
    return tuple(tools[i] for _, i in sorted(scored)[:limit])


def _arguments(text: str) -> dict[str, Any]:
    try:
        args = json.loads(text) if text.strip() else {}
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise SearchError("the search's arguments must be a JSON object")
    return args


def _limit(args: dict[str, Any], kind: str) -> int:
    limit = args.get("limit", _DEFAULT_LIMIT[kind])
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise SearchError("limit must be a positive integer")
    return min(limit, MAX_LIMIT)


def search(kind: str, tools: tuple[Tool, ...], arguments: str) -> tuple[Tool, ...]:
    """The tools a ``kind`` search with these (JSON) arguments finds; ``SearchError`` when it cannot run."""
    args = _arguments(arguments)
    key = "pattern" if kind == "regex" else "query"
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SearchError(f"{key} must be a non-empty string")
    limit = _limit(args, kind)
    return regex_matches(tools, value, limit) if kind == "regex" else bm25_rank(tools, value, limit)
