"""Forced tool calls in each model family's own call syntax (issue #18).

One Lark grammar per syntax mlx-lm parses (and harmony), each allowing exactly one call of one of the
allowed tools, its arguments constrained by the tool's JSON schema:

- ``json_tools`` (Qwen3, Hermes): ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``
- ``qwen3_coder``: ``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...``
- ``glm47`` (GLM-4.5 to 4.7): ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...``
- ``mistral``: ``[TOOL_CALLS]NAME[ARGS]{...}``
- ``kimi_k2``: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}...``
- ``gemma4``: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>`` (flat arguments only)
- ``harmony`` (gpt-oss): ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}``

In the key/value syntaxes a string argument is raw text (what the family's parser keeps as a string)
and any other argument is JSON; properties come in schema order, required ones always. A schema the
syntax cannot promise (a string ``pattern`` written raw, nested objects in Gemma's notation) raises
``ValueError`` naming it.

A custom (freeform) tool (issue 38) is called with one string argument, ``input``, whatever the
syntax: its ``FreeformInput`` spec gives the regular expression the input matches whole — as a JSON
string's ``pattern`` where the syntax writes JSON (llguidance quotes it), as the raw text itself where
it writes raw values (ended lazily at a plain-text terminator, or at a special token). ``call_head``
is the text a call of a tool starts with, up to where its name is known.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tinytitan.engine.grammar.freeform import lark_regex_terminal
from tinytitan.engine.grammar.schema import (
    DEFAULT_TOOL_SCHEMA,
    JSON_OPTIONS,
    clean_schema,
    compile_lark,
    lark_literal,
    rebase_refs,
)

__all__ = [
    "ANY_TEXT",
    "FORCED_SYNTAXES",
    "INPUT",
    "FreeformInput",
    "answer_prefix",
    "call_head",
    "forced_call_grammar",
]

Marker = Callable[[str], str]  # marker text -> Lark expression (a special token or a literal)


@dataclass(frozen=True, slots=True)
class FreeformInput:
    """A custom tool's input: ``regex`` matches it whole (``ANY_TEXT``: a ``text`` format)."""

    regex: str


ANY_TEXT = "(?s:.*)"
INPUT = "input"  # the one argument a custom tool's call carries its input in
ToolSpec = tuple[str, dict[str, Any] | FreeformInput | None]

_RAW_STRING_KEYS = {"type", "enum", "minLength", "maxLength"}
_REGEX = "x-regex"  # a freeform input's own regex, beside its JSON ``pattern`` (llguidance ignores x- keys)


def answer_prefix(syntax: str | None, marker: Marker) -> str | None:
    """What a constrained answer (structured output) starts with in this syntax, as Lark."""
    if syntax == "harmony":
        return f'{marker("<|channel|>")} "final" {marker("<|message|>")}'
    return None


def _json(schema: Any) -> str:
    return f"%json {json.dumps({**schema, 'x-guidance': JSON_OPTIONS}) if isinstance(schema, dict) else '{}'}"


def _args_schema(parameters: dict[str, Any] | FreeformInput | None) -> dict[str, Any]:
    if isinstance(parameters, FreeformInput):
        text = {"type": "string", "pattern": f"^(?:{parameters.regex})$", _REGEX: parameters.regex}
        return {"type": "object", "properties": {INPUT: text}, "required": [INPUT], "additionalProperties": False}
    schema = clean_schema(parameters or DEFAULT_TOOL_SCHEMA)
    return schema if isinstance(schema, dict) else dict(DEFAULT_TOOL_SCHEMA)


def _is_raw_string(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "string"


class _Rules:
    """Lark rules under construction (unique names)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, name: str, body: str) -> str:
        self.lines.append(f"{name}: {body}")
        return name


def _raw_string(rules: _Rules, name: str, schema: dict[str, Any], end: str, where: str) -> str:
    """A raw-text value and the terminator after it (``end``: a Lark expression)."""
    if _REGEX in schema:  # a freeform input: its own regex, ended lazily (or at a special token)
        body = lark_regex_terminal(schema[_REGEX])
        if end.startswith("<["):
            return f"{rules.add(name, body)} {end}"
        rules.add(f"{name}[suffix={end}]", body)
        return name
    extra = set(schema) - _RAW_STRING_KEYS
    if extra:
        raise ValueError(f"{where}: '{sorted(extra)[0]}' cannot be promised for a raw-text argument")
    if "enum" in schema:
        options = [v for v in schema["enum"] if isinstance(v, str)]
        if not options:
            raise ValueError(f"{where}: an enum of strings is needed")
        return f"({' | '.join(lark_literal(v) for v in options)}) {end}"
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    span = "{" + f"{low},{'' if high is None else high}" + "}"
    anything = "/(.|\\n)" + span + "/"
    if end.startswith("<["):  # a special token cannot occur inside the text: any text, then the marker
        return f"{rules.add(name, anything)} {end}"
    stop = json.loads(end)
    if high is None:  # lazy text up to (and with) the terminator, which stays in the output
        # (a ``stop`` would hide it by backtracking, which the sampler cannot undo: a plain-text
        # terminator merged into one token with what follows, GLM's ``>\n``, could never be written)
        rules.add(f"{name}[suffix={end}]", anything)
        return name
    # bounded: llguidance would let a lazy rule end the generation when the bound is reached, so the
    # text may not hold the terminator's first character instead (it then has to follow)
    first = json.dumps(stop[0])[1:-1].replace("]", "\\]").replace("/", "\\/")
    return f"{rules.add(name, f'/[^{first}]' + span + '/')} {end}"


def _key_values(
    rules: _Rules,
    prefix: str,
    schema: dict[str, Any],
    pair: Callable[[str, str], tuple[str, str]],
    where: str,
) -> str:
    """Properties in order: ``pair(key, value_rule) -> (head, end)`` frames each one."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts: list[str] = []
    for j, (key, sub) in enumerate(props.items()):
        head, end = pair(key, f"{prefix}_v{j}")
        if _is_raw_string(sub):
            value = _raw_string(rules, f"{prefix}_v{j}", sub, end, f"{where}.properties.{key}")
        else:
            value = f"{rules.add(f'{prefix}_v{j}', _json(sub))} {end}"
        item = rules.add(f"{prefix}_p{j}", f"{head} {value}")
        parts.append(item if key in required else f"{item}?")
    missing = required - set(props)
    if missing:
        raise ValueError(f"{where}: required '{sorted(missing)[0]}' has no schema")
    return " ".join(parts)


def forced_call_grammar(
    syntax: str,
    tools: Sequence[ToolSpec],
    marker: Marker,
    *,
    prefix: str | None = None,
    newlines: bool = False,
) -> str:
    """The compiled grammar of exactly one call of one of ``tools`` in ``syntax``."""
    if not tools:
        raise ValueError("a forced tool call needs at least one tool")
    build = _BUILDERS.get(syntax)
    if build is None:
        raise ValueError(f"calls in the '{syntax}' syntax cannot be forced")
    rules = _Rules()
    calls = [
        build(rules, f"c{i}", name, _args_schema(params), marker, newlines) for i, (name, params) in enumerate(tools)
    ]
    head = f"{prefix} " if prefix else ""
    lark = "\n".join([f"start: {head}({' | '.join(calls)})", *rules.lines, ""])
    return compile_lark(lark)


def _json_tools(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    arguments = rebase_refs(schema, "#/properties/arguments")
    wrapper = {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    body = f'{marker("<tool_call>")} "\\n" {_json(wrapper)} "\\n" {marker("</tool_call>")}'
    return rules.add(rule, body)


def _qwen3_coder(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    def pair(key: str, _value: str) -> tuple[str, str]:
        return lark_literal(f"<parameter={key}>\n"), lark_literal("\n</parameter>\n")

    params = _key_values(rules, rule, schema, pair, name)
    head = marker("<tool_call>") + " " + lark_literal("\n<function=" + name + ">\n")
    return rules.add(rule, f'{head} {params} "</function>\\n" {marker("</tool_call>")}')


def _glm(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, newlines: bool) -> str:
    nl = '"\\n" ' if newlines else ""

    def pair(key: str, _value: str) -> tuple[str, str]:
        head = f"{marker('<arg_key>')} {lark_literal(key)} {marker('</arg_key>')} {nl}{marker('<arg_value>')}"
        return f"{nl}{head}", marker("</arg_value>")

    params = _key_values(rules, rule, schema, pair, name)
    return rules.add(rule, f"{marker('<tool_call>')} {lark_literal(name)} {params} {nl}{marker('</tool_call>')}")


def _mistral(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    return rules.add(rule, f"{marker('[TOOL_CALLS]')} {lark_literal(name)} {marker('[ARGS]')} {_json(schema)}")


def _kimi(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    begin = f"{marker('<|tool_calls_section_begin|>')} {marker('<|tool_call_begin|>')}"
    head = f"{begin} {lark_literal(f'functions.{name}:0')} {marker('<|tool_call_argument_begin|>')}"
    end = f"{marker('<|tool_call_end|>')} {marker('<|tool_calls_section_end|>')}"
    return rules.add(rule, f"{head} {_json(schema)} {end}")


def _harmony(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    head = f"{marker('<|channel|>')} {lark_literal(f'commentary to=functions.{name} ')}"
    return rules.add(rule, f'{head} {marker("<|constrain|>")} "json" {marker("<|message|>")} {_json(schema)}')


def _gemma4(rules: _Rules, rule: str, name: str, schema: dict[str, Any], marker: Marker, _nl: bool) -> str:
    """Required arguments in order, then each optional one (only after a required one: commas)."""
    quote = marker('<|"|>')
    props = schema.get("properties") or {}
    needed = set(schema.get("required") or ())
    keys = [k for k in props if k in needed]
    keys += [k for k in props if k not in needed] if keys else []
    body: list[str] = []
    for j, key in enumerate(keys):
        sub, where = props[key], f"{name}.properties.{key}"
        if not isinstance(sub, dict) or sub.get("type") in ("object", "array") or "properties" in sub:
            raise ValueError(f"{where}: nested arguments cannot be forced in Gemma's call notation")
        if _is_raw_string(sub):
            value = f"{quote} {_raw_string(rules, f'{rule}_v{j}', sub, quote, where)}"
        else:
            value = rules.add(f"{rule}_v{j}", _json(sub))
        comma = '"," ' if j else ""
        item = f"{comma}{lark_literal(key + ':')} {value}"
        body.append(f"({item})" if key in needed else f"({item})?")
    head = marker("<|tool_call>") + " " + lark_literal("call:" + name + "{")
    return rules.add(rule, f'{head} {" ".join(body)} "}}" {marker("<tool_call|>")}')


def call_head(syntax: str, name: str, *, newlines: bool = False) -> str:
    """The text a call of ``name`` starts with in ``syntax`` (markers as their text), through the
    character that ends the name — what the forced-call grammar of ``name`` writes first."""
    heads = {
        "json_tools": f'<tool_call>\n{{"name": {json.dumps(name)}',
        "qwen3_coder": f"<tool_call>\n<function={name}>",
        "glm47": f"<tool_call>{name}" + ("\n" if newlines else "<arg_key>"),
        "mistral": f"[TOOL_CALLS]{name}[ARGS]",
        "kimi_k2": f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0<|tool_call_argument_begin|>",
        "gemma4": f"<|tool_call>call:{name}{{",
        "harmony": f"<|channel|>commentary to=functions.{name} ",
    }
    if syntax not in heads:
        raise ValueError(f"calls in the '{syntax}' syntax cannot be forced")
    return heads[syntax]


_BUILDERS: dict[str, Callable[..., str]] = {
    "json_tools": _json_tools,
    "qwen3_coder": _qwen3_coder,
    "glm47": _glm,
    "mistral": _mistral,
    "kimi_k2": _kimi,
    "gemma4": _gemma4,
    "harmony": _harmony,
}
FORCED_SYNTAXES = frozenset(_BUILDERS)
