"""The six memory tools, executed against a store: results, and errors the model sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.memory.records import MAX_VALUE_BYTES, Record
from tinytitan.engine.memory.scope import Scope
from tinytitan.engine.memory.store import MemoryBank, MemoryStore
from tinytitan.engine.memory.tools import MEMORY_TOOL_NAMES, memory_tools, run_tool

SCOPE = Scope("tinytitan", "ada", "/projects/app", "header")


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryBank(tmp_path).store(SCOPE)


def _ok(store: MemoryStore, name: str, **args: object) -> dict[str, Any]:
    text = run_tool(store, name, json.dumps(args), session="conv_1")
    assert not text.startswith("Error:"), text
    return json.loads(text)


def _get(store: MemoryStore, key: str) -> Record:
    record = store.get(key)
    assert record is not None, key
    return record


def _error(store: MemoryStore, name: str, arguments: str) -> str:
    text = run_tool(store, name, arguments, session="conv_1")
    assert text.startswith("Error: "), text
    return text


def test_surfaces() -> None:
    assert memory_tools("off") == ()
    assert [t.name for t in memory_tools("minimal")] == ["memory_set", "memory_get", "memory_list"]
    full = memory_tools("full")
    assert {t.name for t in full} == MEMORY_TOOL_NAMES and len(full) == 6
    for tool in full:
        assert tool.parameters is not None and tool.parameters["type"] == "object" and tool.description


def test_set_get_list_search_append_delete(store: MemoryStore) -> None:
    saved = _ok(store, "memory_set", key="project/build", value="make -j4\nthen make test", importance=4, tags=["ci"])
    assert saved["saved"] == "project/build"
    _ok(store, "memory_set", key="user/editor", value="prefers vim")
    got = _ok(store, "memory_get", key="project/build")
    assert (got["value"], got["importance"], got["tags"]) == ("make -j4\nthen make test", 4, ["ci"])
    assert _get(store, "project/build").session == "conv_1"
    listed = _ok(store, "memory_list", prefix="project/")
    assert listed["total"] == 1 and listed["keys"][0]["summary"] == "make -j4 …"
    assert _ok(store, "memory_list")["total"] == 2
    found = _ok(store, "memory_search", query="VIM")
    assert [r["key"] for r in found["results"]] == ["user/editor"]
    assert _ok(store, "memory_search", tags=["ci"])["total"] == 1
    assert _ok(store, "memory_search", min_importance=4)["total"] == 1
    _ok(store, "memory_append", key="project/build", line="CI uses make ci")
    assert _get(store, "project/build").value.endswith("\nCI uses make ci")
    assert _get(store, "project/build").importance == 4
    _ok(store, "memory_append", key="notes/new", line="first line")
    assert _ok(store, "memory_delete", key="user/editor") == {"deleted": "user/editor"}
    assert store.get("user/editor") is None


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("memory_set", '{"key": "../escape", "value": "x"}', "'..'"),
        ("memory_set", '{"key": "a*", "value": "x"}', "glob"),
        ("memory_set", '{"key": "a\\u0007b", "value": "x"}', "control"),
        ("memory_set", json.dumps({"key": "big", "value": "x" * (MAX_VALUE_BYTES + 1)}), "at most 65536 bytes"),
        ("memory_set", '{"key": "k", "value": ""}', "empty"),
        ("memory_set", '{"key": "k", "value": "v", "importance": 9}', "1 to 5"),
        ("memory_set", '{"key": "k", "value": "v", "scope": "other/user"}', "unexpected: scope"),
        ("memory_set", '{"key": "k"}', "value must be a string"),
        ("memory_get", '{"key": "missing"}', "no memory is saved under 'missing'"),
        ("memory_get", "[1, 2]", "JSON object"),
        ("memory_get", "{not json", "not a JSON object"),
        ("memory_delete", '{"key": "missing"}', "no memory"),
        ("memory_list", '{"limit": 0}', "limit"),
        ("memory_list", '{"prefix": "/etc"}', "leading '/'"),
        ("memory_search", '{"query": 5}', "query must be a string"),
        ("memory_frobnicate", "{}", "unknown memory function"),
    ],
)
def test_bad_calls_are_error_results_never_exceptions(store: MemoryStore, name: str, arguments: str, says: str) -> None:
    assert says in _error(store, name, arguments)
    assert len(store) == 0


def test_an_append_that_would_overflow_the_value_is_refused(store: MemoryStore) -> None:
    _ok(store, "memory_set", key="log", value="x" * (MAX_VALUE_BYTES - 10))
    assert "bytes" in _error(store, "memory_append", json.dumps({"key": "log", "line": "y" * 20}))
    assert len(_get(store, "log").value) == MAX_VALUE_BYTES - 10


def test_a_store_without_persistence_says_so_in_write_results(tmp_path: Path) -> None:
    first = MemoryBank(tmp_path)
    first.store(SCOPE)
    second = MemoryBank(tmp_path).store(SCOPE)
    assert _ok(second, "memory_set", key="k", value="v")["persisted"] is False
    first.close()
