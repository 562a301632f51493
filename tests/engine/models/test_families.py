"""The model families' real templates and call syntaxes through the mlx backend (issue #18).

Each family's tiny model directory (tinytitan.testing.families) carries its real chat template:
a full conversation renders through ``MlxBackend.render``, its reasoning levels are detected, its own
output parses into the right events through the backend's parser, and — where the syntax can be
written as a grammar — a forced call from the (random-weight) model always parses and fits the schema.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tinytitan.api.offline import to_chat_request
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.output.parser import ParseOptions
from tinytitan.engine.request import ValidatedRequest
from tinytitan.engine.request.validate import validate
from tinytitan.engine.service import Engine
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
            events = run(collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
            calls = [e for e in events if isinstance(e, ToolCall)]
            assert len(calls) == 1, events
            assert calls[0].name == forced
            schema = next(t["function"]["parameters"] for t in BOUNDED_TOOLS if t["function"]["name"] == forced)
            jsonschema.validate(json.loads(calls[0].arguments), schema)
            assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"
    finally:
        engine.shutdown()


async def collect(engine: Engine, request: Any) -> list[Any]:
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
        events = run(collect(engine, to_chat_request(body, "chat", model=engine.info.id)))
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        jsonschema.validate(json.loads(text), STRUCTURED["json_schema"]["schema"])
        assert not [e for e in events if isinstance(e, ReasoningDelta)]
    finally:
        engine.shutdown()
