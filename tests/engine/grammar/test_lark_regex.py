"""A Lark grammar without recursion read into one regular expression (issue 38): the language is kept
(checked with Python's ``re`` on sentences and near-misses), and what cannot be one is refused by name."""

from __future__ import annotations

import re

import pytest

from tinytitan.engine.grammar.lark_regex import lark_to_regex, regex_literal
from tinytitan.testing.freeform import PATCH, grammar


def matches(source: str, text: str) -> bool:
    return re.fullmatch(lark_to_regex(source), text) is not None


def test_codexs_apply_patch_grammar() -> None:
    source = grammar("codex_apply_patch")
    assert matches(source, PATCH)
    assert matches(source, "*** Begin Patch\n*** Delete File: a\n*** End Patch")  # the last LF is optional
    assert matches(
        source, "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n x\n*** End of File\n*** End Patch"
    )
    assert not matches(source, "*** Begin Patch\n*** End Patch\n")  # a hunk is required
    assert not matches(source, "*** Begin Patch\n*** Add File: a\n*** End Patch\n")  # an added file has lines
    assert not matches(source, PATCH.replace("+line one", "line one"))


def test_codexs_exec_grammar_and_the_js_one() -> None:
    assert matches(grammar("codex_exec"), '// @exec: {"yield": 1}\nawait tools.x();')
    assert not matches(grammar("codex_exec"), "")
    js = grammar("js_exec")
    assert matches(js, 'const r = await tools.exec_command({ cmd: "a \\"b\\"", n: 2 });\ntext(r);\n')
    assert not matches(js, "text(r)\n")
    assert not matches(js, "text({ a: { b: 1 } });\n")  # objects are flat


@pytest.mark.parametrize(
    ("source", "yes", "no"),
    [
        ('start: "a"i "b"', ["Ab", "ab"], ["aB"]),
        ('start: /x+/i "!"', ["XxX!"], ["x"]),
        ('start: "a".."c"~2..3', ["ab", "cba"], ["a", "abca"]),
        ('start: [ "x" ] ("y" | "z")* -> alias', ["", "xyz", "zz"], ["xx"]),
        ("?start: item+\n!item: DIGIT\n    | LETTER\n%import common (DIGIT, LETTER)", ["a1"], ["a 1"]),
        ('start: "a" "b"\n%import common.WS\n%ignore WS', ["a b", " a\tb \n"], ["a x b"]),
        ("start: NAME\nNAME: CNAME\n%import common.CNAME -> CNAME", ["_x1"], ["1x"]),
        ('start: "a.b" // a comment\n# another', ["a.b"], ["axb"]),
    ],
)
def test_the_notation(source: str, yes: list[str], no: list[str]) -> None:
    for text in yes:
        assert matches(source, text), text
    for text in no:
        assert not matches(source, text), text


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ('start: a\na: "(" a ")" | "x"', "refers to itself"),
        ("start: b\nb: c\nc: b", "refers to itself"),
        ('start: "x" y', "'y' is used but not defined"),
        ('x: "a"', "no 'start' rule"),
        ('start: "a"\nstart: "b"', "defined twice"),
        ('start: "a"\n%import other.X', "only lark's common terminals"),
        ('start: "a"\n%import common.NOPE', "common.NOPE"),
        ('start: "a"\n%declare X', "%declare"),
        ("start: /a/l", "regex flag"),
        ('start: ("a"', "unclosed"),
        ('start: "ab".."c"', "single characters"),
    ],
)
def test_what_cannot_be_one_regex_is_refused_by_name(source: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        lark_to_regex(source)


def test_a_literal_reads_alike_in_python_and_rust_syntax() -> None:
    text = "a.b*c (d) [e] {f} ^g$ | h\\ #i &j -k ~l\n\t\r\x01 é"
    assert re.fullmatch(regex_literal(text), text)
    assert "\\ " not in regex_literal(" ")  # an escaped space is an error in the Rust syntax
