"""The model families' real templates and call syntaxes through the mlx backend (issue #18).

Each family's tiny model directory (tinytitan.testing.families) carries its real chat template:
a full conversation renders through ``MlxBackend.render``, its reasoning levels are detected, its own
output parses into the right events through the backend's parser, and — where the syntax can be
written as a grammar — a forced call from the (random-weight) model always parses and fits the schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest

from tinytitan.api.offline import to_chat_request
from tinytitan.engine.backends.mlx import MlxBackend
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.output_parser import ParseOptions
from tinytitan.engine.request import ValidatedRequest
from tinytitan.engine.service import Engine
from tinytitan.engine.validate import validate
from tinytitan.testing.families import FAMILIES, family_dir
from tinytitan.testing.family_outputs import BOUNDED_TOOLS, OUTPUTS, TOOLS, Expected
from tinytitan.testing.loop import run

# family -> (tool syntax, reasoning levels, forced calls)
FACTS: dict[str, tuple[str | None, tuple[str, ...], bool]] = {
    "qwen3": ("json_tools", ("off", "on"), True),
    "qwen3-coder": ("qwen3_coder", (), True),
    "glm-4.6": ("glm47", ("off", "on"), True),
    "glm-4.7": ("glm47", ("off", "on"), True),
    "mistral": ("mistral", (), True),
    "devstral": ("mistral", (), True),
    "gemma-4": ("gemma4", ("off", "on"), True),
    "llama-3": (None, (), False),
    "gpt-oss": ("harmony", ("off", "low", "medium", "high"), True),
    "kimi-k2": ("kimi_k2", (), True),
    "kimi-k2-thinking": ("kimi_k2", (), True),
}
SCENARIOS = [(f, s) for f in FAMILIES for s in OUTPUTS[f]]

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "EARLIER-THOUGHT",
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "PARIS-ARG", "days": 2})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_abc", "content": "SUNNY-22C"},
    {"role": "assistant", "content": "It is sunny, 22C.", "reasoning_content": "LAST-THOUGHT"},
    {"role": "user", "content": "And tomorrow?"},
]


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, MlxBackend]]:
    made: dict[str, MlxBackend] = {}

    def get(name: str) -> MlxBackend:  # NAME, or NAME@text: its markers as plain text
        if name not in made:
            base, _, variant = name.partition("@")
            made[name] = MlxBackend(str(family_dir(base, text_markers=bool(variant))))
        return made[name]

    yield _Lazy(get)
    for backend in made.values():
        backend.unload()


class _Lazy(dict[str, MlxBackend]):
    def __init__(self, get: Callable[[str], MlxBackend]) -> None:
        super().__init__()
        self.get_backend = get

    def __missing__(self, name: str) -> MlxBackend:
        return self.get_backend(name)


def validated(backend: MlxBackend, body: dict[str, Any]) -> ValidatedRequest:
    return validate(to_chat_request(body, "chat", model=backend.info.id), backend.info)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_model_facts(backends: dict[str, MlxBackend], name: str) -> None:
    backend = backends[name]
    syntax, levels, forced = FACTS[name]
    assert (backend.syntax, backend.info.reasoning_levels, backend.info.forced_tool_calls) == (syntax, levels, forced)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_full_conversation_renders(backends: dict[str, MlxBackend], name: str) -> None:
    backend = backends[name]
    prompt = backend.render(validated(backend, {"messages": CONVERSATION, "tools": TOOLS}))
    text = prompt.text
    assert "You are terse." in text and "Weather in Paris?" in text and "And tomorrow?" in text
    assert "SUNNY-22C" in text and "PARIS-ARG" in text and "It is sunny, 22C." in text
    if backend.syntax is None:  # served without tools: the model is not told about them
        assert "get_time" not in text
    else:
        assert "get_time" in text and "The time in a zone" in text
    # an earlier turn's thought is the template's to keep or drop: none of these render one before
    # the last user message (Qwen3, GLM, Kimi and gpt-oss all drop them there)
    assert "EARLIER-THOUGHT" not in text and "LAST-THOUGHT" not in text


@pytest.mark.parametrize("name", [n for n in FAMILIES if FACTS[n][1]])
def test_the_reasoning_switch_changes_the_prompt(backends: dict[str, MlxBackend], name: str) -> None:
    backend = backends[name]
    base = {"messages": [{"role": "user", "content": "hi"}]}
    rendered = {
        level: backend.render(validated(backend, {**base, "reasoning_effort": level})).text
        for level in backend.info.reasoning_levels
    }
    if "on" in rendered:  # a real switch
        assert len(set(rendered.values())) == len(rendered)
    else:  # effort names only (gpt-oss): each renders its own; off cannot switch it off, so renders the cheapest
        assert rendered["off"] == rendered["low"] and "Reasoning: low" in rendered["low"]
        assert len({rendered[lvl] for lvl in rendered if lvl != "off"}) == len(rendered) - 1


def test_a_thought_after_the_last_user_turn_renders_where_the_template_keeps_it(
    backends: dict[str, MlxBackend],
) -> None:
    backend = backends["qwen3"]
    messages = [*CONVERSATION[:3], CONVERSATION[3]]  # ends with the tool result: the call's thought is current
    text = backend.render(validated(backend, {"messages": messages, "tools": TOOLS})).text
    assert "<think>\nEARLIER-THOUGHT\n</think>" in text


def test_mistral_call_ids_are_made_to_fit_its_template(backends: dict[str, MlxBackend]) -> None:
    backend = backends["mistral"]  # its template refuses ids that are not 9 alphanumerics
    text = backend.render(validated(backend, {"messages": CONVERSATION, "tools": TOOLS})).text
    assert "[CALL_ID]" in text and "call_abc" not in text


def test_a_conversation_the_template_refuses_is_a_clear_400(backends: dict[str, MlxBackend]) -> None:
    backend = backends["llama-3"]  # "This model only supports single tool-calls at once!"
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "get_time", "arguments": '{"zone": "CET"}'}}
        for i in range(2)
    ]
    messages = [
        {"role": "user", "content": "times?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c0", "content": "1"},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ]
    with pytest.raises(InvalidRequest) as err:
        backend.render(validated(backend, {"messages": messages, "tools": TOOLS}))
    assert err.value.param == "messages" and "single tool-calls" in err.value.message


def parse(backend: MlxBackend, raw: str, piece: int) -> list[Any]:
    request = validated(backend, {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS})
    prompt = backend.render(request)
    parser = backend.output_parser(ParseOptions(tools=request.tools, start_in_reasoning=prompt.start_in_reasoning))
    events: list[Any] = []
    for i in range(0, len(raw), piece):
        events += parser.feed(raw[i : i + piece])
    return events + parser.finish()


def summary(events: list[Any]) -> Expected:
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta)) or None
    text = "".join(e.text for e in events if isinstance(e, TextDelta)) or None
    calls = tuple((e.name, json.loads(e.arguments)) for e in events if isinstance(e, ToolCall))
    return Expected(reasoning.strip() if reasoning else None, text.strip() if text else None, calls)


@pytest.mark.parametrize("name, scenario", SCENARIOS)
@pytest.mark.parametrize("piece", [1, 10_000])
def test_the_familys_own_output_parses(backends: dict[str, MlxBackend], name: str, scenario: str, piece: int) -> None:
    output = OUTPUTS[name][scenario]
    assert summary(parse(backends[name], output.raw, piece)) == output.expected


@pytest.mark.parametrize("name", [n for n in FAMILIES if FACTS[n][2]])
def test_a_forced_call_from_the_random_model_always_parses(backends: dict[str, MlxBackend], name: str) -> None:
    engine = Engine(backends[name])
    try:
        for forced in ("get_weather", "get_time"):
            body = {
                "messages": [{"role": "user", "content": "Weather?"}],
                "tools": BOUNDED_TOOLS,
                "tool_choice": {"type": "function", "function": {"name": forced}},
                "max_tokens": 400,
                "seed": 7,
                "temperature": 1.0,
            }
            events = run(_collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
            calls = [e for e in events if isinstance(e, ToolCall)]
            assert len(calls) == 1, events
            assert calls[0].name == forced
            schema = next(t["function"]["parameters"] for t in BOUNDED_TOOLS if t["function"]["name"] == forced)
            jsonschema.validate(json.loads(calls[0].arguments), schema)
            assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"
    finally:
        engine.shutdown()


async def _collect(engine: Engine, request: Any) -> list[Any]:
    job = await engine.prepare(request)
    return [event async for event in job.events()]


def test_a_family_without_a_parser_is_served_without_tools_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tinytitan.mlx"):
        backend = MlxBackend(str(family_dir("llama-3")))
    assert "serving it without tools" in caplog.text
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "tool_choice": "required"}
    with pytest.raises(InvalidRequest) as err:
        validated(backend, body)
    assert err.value.code == "unsupported_value" and err.value.param == "tool_choice"


def test_a_schema_the_call_syntax_cannot_promise_is_refused_by_tool(backends: dict[str, MlxBackend]) -> None:
    backend = backends["qwen3-coder"]  # its string arguments are raw text: a pattern cannot be promised
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
            },
        }
    ]
    request = validated(
        backend, {"messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": "required"}
    )
    with pytest.raises(InvalidRequest) as err:
        backend.render(request)
    assert err.value.code == "unsupported_value" and err.value.param == "tools[0].function.parameters"


STRUCTURED: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "weather",
        "schema": {
            "type": "object",
            "properties": {"sunny": {"type": "boolean"}, "unit": {"enum": ["C", "F"]}},
            "required": ["sunny", "unit"],
            "additionalProperties": False,
        },
    },
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_structured_output_from_the_random_model_is_the_document(backends: dict[str, MlxBackend], name: str) -> None:
    engine = Engine(backends[name])
    try:
        body = {
            "messages": [{"role": "user", "content": "Weather?"}],
            "response_format": STRUCTURED,
            "max_tokens": 200,
            "seed": 3,
            "temperature": 1.0,
        }
        events = run(_collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        jsonschema.validate(json.loads(text), STRUCTURED["json_schema"]["schema"])
        assert not [e for e in events if isinstance(e, ReasoningDelta)]
    finally:
        engine.shutdown()


# Issue 28.3: a forced call of every family, on its own tokenizer (markers as special tokens) and on
# one that spells the markers as plain text. The layout each family's forced call emits, pinned:
_ARGS = '{{"path": "{path}", "content": "{content}"}}'
FORCED_LAYOUT: dict[str, str] = {
    "qwen3": '<tool_call>\n{{"name": "read_file", "arguments": ' + _ARGS + "}}\n</tool_call>",
    "qwen3-coder": "<tool_call>\n<function=read_file>\n<parameter=path>\n{path}\n</parameter>\n"
    "<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>",
    "glm-4.6": "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>{path}</arg_value>\n"
    "<arg_key>content</arg_key>\n<arg_value>{content}</arg_value>\n</tool_call>",  # a pair per line
    "glm-4.7": "<tool_call>read_file<arg_key>path</arg_key><arg_value>{path}</arg_value>"
    "<arg_key>content</arg_key><arg_value>{content}</arg_value></tool_call>",
    "mistral": "[TOOL_CALLS]read_file[ARGS]" + _ARGS,
    "devstral": "[TOOL_CALLS]read_file[ARGS]" + _ARGS,
    "gemma-4": '<|tool_call>call:read_file{{path:<|"|>{path}<|"|>,content:<|"|>{content}<|"|>}}<tool_call|>',
    "gpt-oss": "<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>" + _ARGS,
    "kimi-k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>"
    + _ARGS
    + "<|tool_call_end|><|tool_calls_section_end|>",
}
FORCED_LAYOUT["kimi-k2-thinking"] = FORCED_LAYOUT["kimi-k2"]
# gpt-oss's harmony is read from its token ids: its markers are special tokens by construction
FORCED_VARIANTS = [n for n in FAMILIES if FACTS[n][2]] + [
    f"{n}@text" for n in FAMILIES if FACTS[n][2] and n != "gpt-oss"
]


def _read_file(path: dict[str, Any], content: dict[str, Any]) -> list[dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {"path": path, "content": content},
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    return [{"type": "function", "function": {"name": "read_file", "parameters": schema}}]


def _forced(backend: MlxBackend, tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Read it."}], "tools": tools, "tool_choice": "required", **extra}


def _head(backend: MlxBackend, request: ValidatedRequest) -> str:
    """What the grammar puts before the call: the close of a thought the template opened."""
    think_end = backend.tokenizer.think_end
    return f"{think_end}\n\n" if backend.render(request).start_in_reasoning and think_end else ""


@pytest.mark.parametrize("variant", FORCED_VARIANTS)
def test_a_forced_call_with_free_text_arguments_fits_its_grammar_on_both_tokenizers(
    backends: dict[str, MlxBackend], variant: str
) -> None:
    """The family's own call, tokenized by the served tokenizer, is what the forced-call grammar accepts;
    a plain-text end marker used to be a hidden ``stop`` the tokens could not write (GLM's ``>\\n``)."""
    import llguidance

    from tinytitan.engine.backends.mlx.constrain import grammar_for

    name = variant.partition("@")[0]
    backend = backends[variant]
    free = {"type": "string"}
    request = validated(backend, _forced(backend, _read_file(free, free)))
    layouts = {FORCED_LAYOUT[name]} | ({FORCED_LAYOUT["glm-4.6"], FORCED_LAYOUT["glm-4.7"]} if "glm" in name else set())
    newlines = "\n<arg_key>" in FORCED_LAYOUT[name]
    grammar = grammar_for(
        request,
        backend.render(request),
        backend.lltokenizer,
        backend.tokenizer,
        syntax=backend.syntax,
        newlines=newlines,
    )
    assert grammar is not None
    for layout in layouts:  # the family's layout is accepted; GLM's other one is not
        text = _head(backend, request) + layout.format(path="src/app.py", content="print(1)")
        matcher = llguidance.LLMatcher(backend.lltokenizer, grammar)
        tokens = backend.tokenizer.encode(text, add_special_tokens=False)
        accepted = all(matcher.consume_token(t) for t in tokens) and matcher.is_accepting()
        assert accepted == (layout == FORCED_LAYOUT[name]), (layout, matcher.get_error())


@pytest.mark.parametrize("variant", FORCED_VARIANTS)
def test_a_forced_call_from_the_random_model_emits_its_familys_layout(
    backends: dict[str, MlxBackend], variant: str
) -> None:
    name = variant.partition("@")[0]
    backend = backends[variant]
    tools = _read_file({"type": "string", "enum": ["a.txt", "b.txt"]}, {"type": "string", "enum": ["hi", "yo"]})
    raw: list[str] = []
    parser_of = backend.output_parser

    def recording(options: ParseOptions) -> Any:
        parser = parser_of(options)
        feed = parser.feed

        def record(piece: str, tokens: int = 1) -> list[Any]:
            raw.append(piece)
            return feed(piece, tokens)

        parser.feed = record  # type: ignore[method-assign]
        return parser

    engine = Engine(backend)
    try:
        backend.output_parser = recording  # type: ignore[method-assign]
        body = _forced(backend, tools, max_tokens=200, seed=5, temperature=1.0)
        events = run(_collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
    finally:
        del backend.output_parser
        engine.shutdown()
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    args = json.loads(call.arguments)
    assert call.name == "read_file" and sorted(args) == ["content", "path"], events
    head = _head(backend, validated(backend, body))
    assert "".join(raw).strip() == (head + FORCED_LAYOUT[name].format(**args)).strip()
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"
