"""A custom tool's input grammar (issue 38): compiled once, checked byte by byte.

A Responses ``custom`` tool's ``format`` is ``text`` (any input) or a grammar: ``lark`` or ``regex``.
``compile_input`` reads one into an ``InputGrammar``: the regular expression the input must match
whole (``lark_regex`` reads a Lark grammar into one), which the call grammars of ``calls`` embed in
each family's syntax, and the llguidance grammar of the client's own definition, which ``accepts``
holds a finished input to — the input a client receives always parses under the grammar it sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from tinytitan.engine.grammar.lark_regex import lark_to_regex
from tinytitan.engine.grammar.schema import compile_lark

__all__ = ["SYNTAXES", "InputGrammar", "accepts", "compile_input", "lark_regex_terminal"]

SYNTAXES = ("lark", "regex")


@dataclass(frozen=True, slots=True)
class InputGrammar:
    """A custom tool's input: ``regex`` matches it whole; ``grammar`` is the client's, compiled."""

    syntax: str
    definition: str
    regex: str
    grammar: str


def lark_regex_terminal(regex: str) -> str:
    """``regex`` as a Lark ``/…/`` terminal."""
    import llguidance

    return "/" + llguidance.regex_to_lark(regex, "") + "/"


@lru_cache(maxsize=64)
def compile_input(syntax: str, definition: str) -> InputGrammar:
    """The input grammar of a ``format`` ``{type: grammar, syntax, definition}``; ``ValueError`` says
    what cannot be compiled (an unknown syntax, a grammar llguidance refuses, a recursive Lark rule)."""
    if syntax not in SYNTAXES:
        raise ValueError(f"unknown grammar syntax '{syntax}'; use one of {', '.join(SYNTAXES)}")
    if not definition.strip():
        raise ValueError("the grammar definition is empty")
    if syntax == "lark":
        own = compile_lark(definition)  # the client's grammar as llguidance reads it (errors name its lines)
        regex = lark_to_regex(definition)
    else:
        regex = definition
        own = compile_lark(f"start: {lark_regex_terminal(regex)}\n")
    compile_lark(f"start: {lark_regex_terminal(regex)}\n")  # what the call grammars embed
    return InputGrammar(syntax, definition, regex, own)


class _Bytes:
    """A tokenizer whose tokens are the 256 bytes (and an end token): llguidance reads text byte by byte."""

    def __init__(self) -> None:
        self.eos_token_id = 256
        self.bos_token_id = None
        self.tokens = [bytes([i]) for i in range(256)] + [b"<end>"]
        self.special_token_ids = [256]

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


@cache
def _byte_tokenizer() -> Any:
    import llguidance

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()))


def accepts(grammar: str, text: str) -> bool:
    """Whether ``text`` is, whole, a sentence of the compiled ``grammar``."""
    import llguidance

    matcher = llguidance.LLMatcher(_byte_tokenizer(), grammar, log_level=0)
    for byte in text.encode("utf-8"):
        if not matcher.consume_token(byte):
            return False
    return bool(matcher.is_accepting())
