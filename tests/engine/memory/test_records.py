"""Keys, prefixes, values, tags and importance: what the model may write."""

from __future__ import annotations

import re

import pytest

from tinytitan.engine.memory.records import (
    MAX_VALUE_BYTES,
    MemoryToolError,
    check_importance,
    check_key,
    check_prefix,
    check_tags,
    check_value,
    summary_line,
)


@pytest.mark.parametrize("key", ["project/build-command", "user/preferences", "a", "v1.2/notes_x:y@z+w", "café/ünï"])
def test_good_keys(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("../secrets", "'..' segment"),
        ("a/../../b", "'..' segment"),
        ("a/./b", "'.' or '..'"),
        ("/etc/passwd", "leading '/'"),
        ("~/notes", "leading '~'"),
        ("a//b", "empty"),
        ("a/", "empty"),
        ("proj*", "glob"),
        ("a?b", "glob"),
        ("[ab]", "glob"),
        ("a\nb", "control"),
        ("a\x00b", "control"),
        ("a\\b", "'/'"),
        ("has space", "bad segment"),
        ("x" * 201, "longer than"),
        ("/".join(["a"] * 17), "segments"),
        ("", "non-empty"),
        (None, "non-empty"),
        (7, "non-empty"),
    ],
)
def test_bad_keys_are_refused_with_a_reason(key: object, why: str) -> None:
    with pytest.raises(MemoryToolError, match=re.escape(why)):
        check_key(key)


def test_prefixes_may_be_partial_or_end_in_a_slash_but_never_escape() -> None:
    assert check_prefix(None) == ""
    assert check_prefix("proj") == "proj"
    assert check_prefix("project/") == "project/"
    for bad in ("../", "/abs", "a*", "a//"):
        with pytest.raises(MemoryToolError):
            check_prefix(bad)


def test_values_are_bounded_in_utf8_bytes() -> None:
    assert check_value("x" * MAX_VALUE_BYTES)
    with pytest.raises(MemoryToolError, match="at most 65536 bytes"):
        check_value("x" * (MAX_VALUE_BYTES + 1))
    # 3-byte characters: the limit counts bytes, not characters
    with pytest.raises(MemoryToolError, match="bytes"):
        check_value("€" * (MAX_VALUE_BYTES // 3 + 1))
    for bad in ("", "   ", 5, None, "\ud800", "a\x00b"):
        with pytest.raises(MemoryToolError):
            check_value(bad)


def test_importance_and_tags() -> None:
    assert check_importance(None) == 3
    assert check_importance(5) == 5
    assert check_importance(2.0) == 2
    for bad in (0, 6, 2.5, "3", True):
        with pytest.raises(MemoryToolError):
            check_importance(bad)
    assert check_tags(["ci", "ci", "build"]) == ("ci", "build")
    assert check_tags("one") == ("one",)
    for bad_tags in ([""], ["a b"], [1], ["x"] * 17, {"a": 1}):
        with pytest.raises(MemoryToolError):
            check_tags(bad_tags)


def test_summary_is_the_first_line_shortened() -> None:
    assert summary_line("make -j4") == "make -j4"
    assert summary_line("\n  first\nsecond") == "first …"
    assert summary_line("x" * 500).endswith(" …")
    assert len(summary_line("x" * 500)) < 130
