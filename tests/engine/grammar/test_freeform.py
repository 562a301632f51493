"""A custom tool's input grammar (issue 38): compiled once, refused by name when it cannot be, and
every finished input held to the client's own grammar byte by byte."""

from __future__ import annotations

import re

import pytest

from tinytitan.engine.grammar.freeform import accepts, compile_input
from tinytitan.testing.freeform import PATCH, grammar


def test_codexs_grammar_compiles_and_holds_inputs_to_itself() -> None:
    compiled = compile_input("lark", grammar("codex_apply_patch"))
    assert accepts(compiled.grammar, PATCH)
    assert not accepts(compiled.grammar, PATCH.replace("*** End Patch", "*** Fin"))
    assert not accepts(compiled.grammar, PATCH + "trailing")
    assert re.fullmatch(compiled.regex, PATCH)  # the regex the call grammars embed agrees


def test_a_regex_format() -> None:
    compiled = compile_input("regex", r"[a-z]+/\d{2}")
    assert accepts(compiled.grammar, "ab/12") and not accepts(compiled.grammar, "ab/1")
    assert not accepts(compiled.grammar, "é/12")


def test_bytes_of_any_text() -> None:
    compiled = compile_input("regex", r"(?s:.*)")
    assert accepts(compiled.grammar, 'é\x00\n"\\{}') and accepts(compiled.grammar, "")


@pytest.mark.parametrize(
    ("syntax", "definition", "words"),
    [
        ("lark", "start: ((", "Expected"),
        ("lark", "", "empty"),
        ("regex", "(", "regex"),
        ("regex", r"(\w)\1", "backreferences"),
        ("pcre", "a", "unknown grammar syntax"),
        ("lark", 'start: s\ns: "(" s ")" | "x"', "refers to itself"),
    ],
)
def test_what_cannot_be_compiled(syntax: str, definition: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        compile_input(syntax, definition)
