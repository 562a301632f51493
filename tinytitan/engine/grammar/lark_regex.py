"""A Lark grammar whose rules do not recurse, read into ONE regular expression (issue 38).

A custom tool's input sits inside a tool call written in the model family's own syntax: between raw
markers (``<arg_value>…</arg_value>``) or inside a JSON string (``{"input": "…"}``). llguidance
quotes a regular expression into a JSON string by itself (a schema's ``pattern``) and ends one lazily
at a plain-text marker (``[suffix=…]``), which a nested grammar cannot do — so the client's grammar is
read here into the regular expression it describes, the same one in every syntax.

What is read: rules and terminals (``name:`` / ``NAME:``, with ``?``/``!`` and ``.priority``),
alternatives over lines, groups ``( )``, optionals ``[ ]``, ``? * +``, ``~ n`` and ``~ n..m``, string
literals (``i`` flag), ``/regex/`` (``i s m x`` flags), ``"a".."z"`` ranges, aliases ``-> name``,
comments (``//`` and ``#``), ``%import common.NAME`` (and ``-> ALIAS``, and ``(A, B)``) and ``%ignore``
(what it names may stand between any two items of a rule). A rule that reaches itself is refused:
its language is not regular. ``ValueError`` names what cannot be read.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

__all__ = ["COMMON", "lark_to_regex", "regex_literal"]

# lark's ``common.lark`` terminals, as regular expressions
COMMON: dict[str, str] = {
    "DIGIT": "[0-9]",
    "HEXDIGIT": "[a-fA-F0-9]",
    "INT": "[0-9]+",
    "SIGNED_INT": "[+-]?[0-9]+",
    "DECIMAL": r"(?:[0-9]+\.[0-9]*|\.[0-9]+)",
    "_EXP": "[eE][+-]?[0-9]+",
    "FLOAT": r"(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)",
    "SIGNED_FLOAT": r"[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)",
    "NUMBER": r"(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)",
    "SIGNED_NUMBER": r"[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)",
    "ESCAPED_STRING": r'"(?:[^"\\\n]|\\.)*"',
    "LCASE_LETTER": "[a-z]",
    "UCASE_LETTER": "[A-Z]",
    "LETTER": "[A-Za-z]",
    "WORD": "[A-Za-z]+",
    "CNAME": "[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": "[ \\t]+",
    "WS": "[ \\t\\f\\r\\n]+",
    "CR": "\\r",
    "LF": "\\n",
    "NEWLINE": "(?:\\r?\\n)+",
    "SH_COMMENT": "#[^\\n]*",
    "CPP_COMMENT": "//[^\\n]*",
    "SQL_COMMENT": "--[^\\n]*",
}
_TOKEN = re.compile(
    r"""
    (?P<space>[ \t]+|\\\n)
  | (?P<comment>(?://|\#)[^\n]*)
  | (?P<newline>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*"i?)
  | (?P<regex>/(?:[^/\\\n]|\\.)+/[imsxlu]*)
  | (?P<directive>%[a-z]+)
  | (?P<arrow>->)
  | (?P<range>\.\.)
  | (?P<number>[0-9]+)
  | (?P<name>[_A-Za-z][_A-Za-z0-9]*(?:\.[_A-Za-z][_A-Za-z0-9]*)*(?:\.-?[0-9]+)?)
  | (?P<op>[:|()\[\]?!*+~,{}])
    """,
    re.VERBOSE,
)
_SPECIAL = set("\\.+*?()|[]{}^$#&-~ ")
_FLAGS = {"i": "i", "s": "s", "m": "m", "x": "x"}


def regex_literal(text: str) -> str:
    """``text`` as a regular expression both Python's ``re`` and the Rust regex syntax read alike."""
    out = []
    for ch in text:
        if ch in _SPECIAL:
            out.append("\\" + ch if ch != " " else " ")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class _Def:
    name: str
    alternatives: list[list[tuple[str, str]]]  # each alternative: a list of (kind, value) tokens
    terminal: bool


@dataclass
class _Grammar:
    defs: dict[str, _Def] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)


def _tokens(source: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            line = source.count("\n", 0, pos) + 1
            raise ValueError(f"line {line}: cannot read {source[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        if kind not in ("space", "comment"):
            out.append((kind, m.group()))
        pos = m.end()
    return out


def _statements(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Logical lines: a line that starts with ``|`` continues the one before."""
    lines: list[list[tuple[str, str]]] = [[]]
    for token in tokens:
        if token[0] == "newline":
            lines.append([])
        else:
            lines[-1].append(token)
    statements: list[list[tuple[str, str]]] = []
    for line in lines:
        if not line:
            continue
        if line[0] == ("op", "|") and statements:
            statements[-1].extend(line)
        else:
            statements.append(line)
    return statements


def _alternatives(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """``tokens`` split at the ``|`` outside any group."""
    alternatives: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for token in tokens:
        if token[0] == "op" and token[1] in "([":
            depth += 1
        elif token[0] == "op" and token[1] in ")]":
            depth -= 1
        if token == ("op", "|") and depth == 0:
            alternatives.append([])
        else:
            alternatives[-1].append(token)
    return alternatives


def _read(source: str) -> _Grammar:
    grammar = _Grammar()
    for statement in _statements(_tokens(source)):
        if statement[0] in (("op", "?"), ("op", "!")):  # ?rule inlines its node, !rule keeps its tokens
            statement = statement[1:]
        kind, value = statement[0]
        if kind == "directive":
            _directive(grammar, value, statement[1:])
            continue
        if kind != "name" or len(statement) < 2 or statement[1] != ("op", ":"):
            raise ValueError(f"expected a rule or a terminal definition, got {' '.join(v for _, v in statement)!r}")
        name = value.split(".")[0]
        if name in grammar.defs:
            raise ValueError(f"'{name}' is defined twice")
        grammar.defs[name] = _Def(name, _alternatives(statement[2:]), terminal=name.lstrip("_")[:1].isupper())
    return grammar


def _directive(grammar: _Grammar, directive: str, rest: list[tuple[str, str]]) -> None:
    words = [v for _, v in rest]
    if directive == "%ignore":
        grammar.ignore.append(" ".join(words))
        grammar.defs.setdefault(f"__ignore{len(grammar.ignore)}", _Def("", [rest], terminal=True))
        return
    if directive != "%import":
        raise ValueError(f"{directive} is not supported in a tool's grammar")
    if not words:
        raise ValueError("%import names nothing")
    module, _, name = words[0].rpartition(".")
    if words[0].startswith("common") and len(words) > 1 and words[1] == "(":  # %import common (A, B)
        names = [w for w in words[2:] if w not in (",", ")")]
        for one in names:
            _common(grammar, one, one)
        return
    if module != "common":
        raise ValueError(f"%import {words[0]}: only lark's common terminals can be imported")
    alias = words[2] if len(words) == 3 and words[1] == "->" else name
    _common(grammar, name, alias)


def _common(grammar: _Grammar, name: str, alias: str) -> None:
    if name not in COMMON:
        raise ValueError(f"%import common.{name}: not one of lark's common terminals this server knows")
    grammar.defs[alias] = _Def(alias, [[("rx", COMMON[name])]], terminal=True)


class _Flatten:
    def __init__(self, grammar: _Grammar) -> None:
        self.grammar = grammar
        self.done: dict[str, str] = {}
        self.stack: list[str] = []
        names = [f"__ignore{i + 1}" for i in range(len(grammar.ignore))]
        self.ignore = ""
        if names:
            parts = [self.symbol(n) for n in names]
            self.ignore = "(?:" + "|".join(parts) + ")*"

    def symbol(self, name: str) -> str:
        if name in self.done:
            return self.done[name]
        definition = self.grammar.defs.get(name)
        if definition is None:
            raise ValueError(f"'{name}' is used but not defined")
        if name in self.stack:
            raise ValueError(f"rule '{name}' refers to itself: only grammars without recursion are supported")
        self.stack.append(name)
        try:
            glue = "" if definition.terminal else self.ignore
            alternatives = [self.sequence(alt, glue) for alt in definition.alternatives]
        finally:
            self.stack.pop()
        regex = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        self.done[name] = regex
        return regex

    def sequence(self, tokens: list[tuple[str, str]], glue: str) -> str:
        items: list[str] = []
        i = 0
        while i < len(tokens):
            kind, value = tokens[i]
            if (kind, value) == ("arrow", "->"):  # an alias names the tree node: no language of its own
                break
            item, i = self.atom(tokens, i)
            item, i = self.suffixes(tokens, i, item)
            items.append(item)
        if not glue:
            return "".join(items)
        return glue + glue.join(items) + glue if items else glue

    def atom(self, tokens: list[tuple[str, str]], i: int) -> tuple[str, int]:
        kind, value = tokens[i]
        if kind == "string":
            text = _string(value)
            if i + 2 < len(tokens) and tokens[i + 1] == ("range", "..") and tokens[i + 2][0] == "string":
                high = _string(tokens[i + 2][1])
                if len(text) != 1 or len(high) != 1:
                    raise ValueError(f"a range needs single characters, got {value}..{tokens[i + 2][1]}")
                return f"[{regex_literal(text)}-{regex_literal(high)}]", i + 3
            literal = "(?:" + regex_literal(text) + ")"
            return (f"(?i:{regex_literal(text)})" if value.endswith("i") else literal), i + 1
        if kind == "regex":
            body, _, flags = value[1:].rpartition("/")
            body = body.replace("\\/", "/")
            bad = set(flags) - set(_FLAGS)
            if bad:
                raise ValueError(f"regex flag '{sorted(bad)[0]}' is not supported")
            return (f"(?{flags}:{body})" if flags else f"(?:{body})"), i + 1
        if kind == "rx":  # a common terminal
            return f"(?:{value})", i + 1
        if kind == "name":
            return "(?:" + self.symbol(value) + ")", i + 1
        if (kind, value) in (("op", "("), ("op", "[")):
            close = ")" if value == "(" else "]"
            end = _matching(tokens, i, close)
            parts = _alternatives(tokens[i + 1 : end])
            glue = self.ignore if not self._in_terminal() else ""
            group = "(?:" + "|".join(self.sequence(p, glue) for p in parts) + ")"
            return (group + "?" if value == "[" else group), end + 1
        raise ValueError(f"unexpected {value!r} in a definition")

    def _in_terminal(self) -> bool:
        return bool(self.stack) and self.grammar.defs[self.stack[-1]].terminal

    def suffixes(self, tokens: list[tuple[str, str]], i: int, item: str) -> tuple[str, int]:
        while i < len(tokens):
            kind, value = tokens[i]
            if kind == "op" and value in "?*+":
                item = f"(?:{item}){value}"
                i += 1
            elif (kind, value) == ("op", "~"):
                if i + 1 >= len(tokens) or tokens[i + 1][0] != "number":
                    raise ValueError("'~' needs a count")
                low = tokens[i + 1][1]
                if i + 3 < len(tokens) and tokens[i + 2] == ("range", "..") and tokens[i + 3][0] == "number":
                    item, i = f"(?:{item}){{{low},{tokens[i + 3][1]}}}", i + 4
                else:
                    item, i = f"(?:{item}){{{low}}}", i + 2
            else:
                break
        return item, i


def _matching(tokens: list[tuple[str, str]], start: int, close: str) -> int:
    depth = 0
    for j in range(start, len(tokens)):
        kind, value = tokens[j]
        if kind == "op" and value in "([":
            depth += 1
        elif kind == "op" and value in ")]":
            depth -= 1
            if depth == 0:
                if value != close:
                    raise ValueError(f"mismatched '{value}'")
                return j
    raise ValueError(f"unclosed '{tokens[start][1]}'")


def _string(token: str) -> str:
    body = token[:-1] if token.endswith("i") else token
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError):
        raise ValueError(f"cannot read the string {token}") from None
    if not isinstance(value, str):
        raise ValueError(f"cannot read the string {token}")
    return value


def lark_to_regex(source: str) -> str:
    """The regular expression of ``source``'s ``start`` rule; ``ValueError`` when it cannot be one."""
    grammar = _read(source)
    if "start" not in grammar.defs:
        raise ValueError("the grammar has no 'start' rule")
    flat = _Flatten(grammar)
    return flat.symbol("start")
