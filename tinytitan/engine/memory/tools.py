"""The six ``memory_*`` functions the server runs itself, and their results (reference §14).

``memory_tools(surface)`` is what the decorator offers the model (``full``: all six; ``minimal``:
set, get, list; ``off``: none). ``run_tool`` executes one call against a workspace's store and
returns the text of the tool message fed back to the model: a JSON object, or ``Error: …`` for
anything the model got wrong (a bad key, an oversized value, an unknown key, bad arguments) —
never an exception, so a model's mistake costs it one round, not the request.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from tinytitan.engine.memory.records import (
    MAX_VALUE_BYTES,
    MemoryToolError,
    Record,
    check_importance,
    check_key,
    check_prefix,
    check_tags,
    check_value,
    summary_line,
)
from tinytitan.engine.memory.store import MemoryStore
from tinytitan.engine.request import Tool

__all__ = ["MEMORY_TOOL_NAMES", "SURFACES", "memory_tools", "run_tool"]

log = logging.getLogger("tinytitan.memory")

SURFACES = ("off", "minimal", "full")
LIST_LIMIT, LIST_MAX = 50, 200
SEARCH_LIMIT, SEARCH_MAX = 10, 50

_KEY = {"type": "string", "description": "Path-like key, e.g. 'project/build-command' or 'user/preferences'."}
_PREFIX = {"type": "string", "description": "Only keys starting with this, e.g. 'project/'."}
_IMPORTANCE = {"type": "integer", "minimum": 1, "maximum": 5, "description": "1 trivia … 5 essential (default 3)."}
_TAGS = {"type": "array", "items": {"type": "string"}, "description": "Short labels, e.g. ['build', 'ci']."}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "memory_search": (
        "Search this workspace's saved memories by words in their keys, values or tags.",
        _object(
            {
                "query": {"type": "string", "description": "Words that must all appear (any case)."},
                "prefix": _PREFIX,
                "tags": _TAGS,
                "min_importance": _IMPORTANCE,
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX},
            }
        ),
    ),
    "memory_get": ("Read one saved memory in full.", _object({"key": _KEY}, ("key",))),
    "memory_list": (
        "List saved memory keys with a one-line summary of each.",
        _object({"prefix": _PREFIX, "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX}}),
    ),
    "memory_set": (
        "Save (or replace) a durable fact about this workspace or the user under a key.",
        _object(
            {
                "key": _KEY,
                "value": {
                    "type": "string",
                    "description": f"The fact, self-contained (at most {MAX_VALUE_BYTES} bytes).",
                },
                "importance": _IMPORTANCE,
                "tags": _TAGS,
            },
            ("key", "value"),
        ),
    ),
    "memory_append": (
        "Add one line to the end of a saved memory (creates it if missing).",
        _object({"key": _KEY, "line": {"type": "string"}}, ("key", "line")),
    ),
    "memory_delete": ("Forget a saved memory that is wrong or no longer useful.", _object({"key": _KEY}, ("key",))),
}

MEMORY_TOOL_NAMES = frozenset(_SPECS)
_MINIMAL = ("memory_set", "memory_get", "memory_list")


def memory_tools(surface: str) -> tuple[Tool, ...]:
    """The tools offered for a surface, in a stable order (so the prompt prefix is stable too)."""
    if surface == "off":
        return ()
    names = _MINIMAL if surface == "minimal" else tuple(_SPECS)
    return tuple(Tool(name, _SPECS[name][0], _SPECS[name][1]) for name in names)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _full(record: Record) -> dict[str, Any]:
    return {
        "key": record.key,
        "value": record.value,
        "importance": record.importance,
        "tags": list(record.tags),
        "created": _when(record.created),
        "updated": _when(record.updated),
    }


def _brief(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {"key": record.key, "summary": summary_line(record.value), "importance": record.importance}
    if record.tags:
        out["tags"] = list(record.tags)
    out["updated"] = _when(record.updated)
    return out


def _limit(value: Any, default: int, most: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MemoryToolError(f"limit must be a whole number from 1 to {most}")
    return min(value, most)


def _saved(store: MemoryStore, record: Record, evicted: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"saved": record.key, "created": _when(record.created), "updated": _when(record.updated)}
    if evicted:
        out["evicted"] = evicted
    if not store.persistent:
        out["persisted"] = False
    return out


def _call(store: MemoryStore, name: str, args: dict[str, Any], session: str | None) -> dict[str, Any]:
    if name == "memory_get":
        key = check_key(args.get("key"))
        record = store.get(key)
        if record is None:
            raise MemoryToolError(f"no memory is saved under '{key}' (memory_list shows what there is)")
        return _full(record)
    if name == "memory_list":
        found, total = store.list(check_prefix(args.get("prefix")), _limit(args.get("limit"), LIST_LIMIT, LIST_MAX))
        return {"keys": [_brief(r) for r in found], "total": total}
    if name == "memory_search":
        query = args.get("query") or ""
        if not isinstance(query, str):
            raise MemoryToolError("query must be a string")
        found, total = store.search(
            query,
            prefix=check_prefix(args.get("prefix")),
            tags=check_tags(args.get("tags")),
            min_importance=check_importance(args.get("min_importance"), default=1),
            limit=_limit(args.get("limit"), SEARCH_LIMIT, SEARCH_MAX),
        )
        return {"results": [_brief(r) for r in found], "total": total}
    if name == "memory_set":
        key = check_key(args.get("key"))
        value = check_value(args.get("value"))
        record, evicted = store.set(
            key,
            value,
            importance=check_importance(args.get("importance")),
            tags=check_tags(args.get("tags")),
            session=session,
        )
        return _saved(store, record, evicted)
    if name == "memory_append":
        key = check_key(args.get("key"))
        line = check_value(args.get("line"), what="line")
        old = store.get(key)
        value = check_value(f"{old.value.rstrip(chr(10))}\n{line}" if old else line, what="the appended value")
        importance = old.importance if old else check_importance(None)
        record, evicted = store.set(key, value, importance=importance, tags=old.tags if old else (), session=session)
        return _saved(store, record, evicted)
    if name == "memory_delete":
        key = check_key(args.get("key"))
        if not store.delete(key):
            raise MemoryToolError(f"no memory is saved under '{key}'")
        return {"deleted": key}
    raise MemoryToolError(f"unknown memory function '{name}'")


def _arguments(name: str, arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        raise MemoryToolError("the arguments are not a JSON object") from None
    if not isinstance(args, dict):
        raise MemoryToolError("the arguments must be a JSON object")
    allowed = set(_SPECS[name][1]["properties"]) if name in _SPECS else set()
    unexpected = sorted(set(args) - allowed)
    if unexpected:
        raise MemoryToolError(f"{name} takes {', '.join(sorted(allowed))}; unexpected: {', '.join(unexpected)}")
    return args


def run_tool(store: MemoryStore, name: str, arguments: str, *, session: str | None = None) -> str:
    """Execute one memory call; the text of its tool message (``Error: …`` when it failed)."""
    try:
        result = _call(store, name, _arguments(name, arguments), session)
    except MemoryToolError as exc:
        log.info("memory %s: %s failed: %s", store.scope.key, name, exc)
        return f"Error: {exc}"
    except Exception:  # a bug here must not fail the client's request
        log.exception("memory %s: %s raised", store.scope.key, name)
        return f"Error: {name} failed inside the server; try again or continue without it"
    return json.dumps(result, ensure_ascii=False)
