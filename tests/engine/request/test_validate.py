"""The one validator (reference §4) as a pure function: every refusal by param and code, every default."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import (
    ChatRequest,
    FormatRequest,
    Message,
    ModelInfo,
    Part,
    ReasoningControls,
    Sampling,
    Source,
    Tool,
    ToolCall,
    ToolChoice,
    ValidatedRequest,
)
from tinytitan.engine.request.defaults import (
    GENERATION_CONFIG,
    REQUEST,
    SERVE_FLAG,
    SERVER_DEFAULT,
    model_defaults,
    with_flags,
)
from tinytitan.engine.request.validate import MAX_MESSAGES, MAX_SCHEMA_DEPTH, MAX_TOOLS, validate

MODEL = ModelInfo("m", context_window=1000)
FORCING = replace(MODEL, forced_tool_calls=True)
USER = Message("user", "hi")
NOT_A_SCHEMA: Any = "schema"  # what a client may send where a schema belongs
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}


def request(*messages: Message, **fields: Any) -> ChatRequest:
    return ChatRequest(model="m", messages=messages or (USER,), **fields)


def ok(*messages: Message, model: ModelInfo = MODEL, **fields: Any) -> ValidatedRequest:
    return validate(request(*messages, **fields), model)


def refused(*messages: Message, model: ModelInfo = MODEL, **fields: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        validate(request(*messages, **fields), model)
    return info.value


def call(id: str = "c1", name: str = "f", arguments: str = "{}", source: Source | None = None) -> ToolCall:
    return ToolCall(id, name, arguments, source=source)


def exchange(*calls: ToolCall) -> tuple[Message, ...]:
    """A user turn, an assistant turn making ``calls``, and a tool result for each."""
    results = tuple(Message("tool", "r", tool_call_id=c.id) for c in calls)
    return (USER, Message("assistant", "", tool_calls=calls), *results)


# -- request-level refusals by name --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
    ],
)
def test_refused_by_name(fields: dict[str, Any], param: str) -> None:
    error = refused(**fields)
    assert (error.param, error.code) == (param, "unsupported_value")


def test_n_of_one_and_false_logprobs_are_fine() -> None:
    base = ok()
    asked = ok(n=1, logprobs=False, top_logprobs=0)
    assert replace(asked, request=base.request) == base  # they change nothing in what is served


def test_include_usage_only_with_stream() -> None:
    error = refused(include_usage=True)
    assert error.param == "stream_options.include_usage"
    ok(include_usage=True, stream=True)


# -- messages ------------------------------------------------------------------------------------


def test_empty_and_too_many_messages_name_the_protocols_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        validate(ChatRequest(model="m", messages=(), messages_param="input"), MODEL)
    assert (info.value.param, info.value.code) == ("input", "invalid_message")
    error = refused(*[USER] * (MAX_MESSAGES + 1))
    assert (error.param, error.code) == ("messages", "value_too_large")
    assert len(ok(*[USER] * MAX_MESSAGES).turns) == MAX_MESSAGES


def test_unknown_role() -> None:
    error = refused(Message("robot", "hi"))
    assert (error.param, error.code) == ("messages[0].role", "invalid_message")


def test_guidance_merges_into_one_system_text_and_developer_is_system() -> None:
    validated = ok(Message("system", "a"), Message("developer", "b"), Message("system", ""), USER)
    assert validated.system == "a\n\nb"
    assert [t.role for t in validated.turns] == ["user"]
    assert ok().system is None


def test_guidance_after_a_turn_is_refused() -> None:
    error = refused(USER, Message("system", "late"))
    assert (error.param, error.code) == ("messages[1].role", "invalid_message")
    assert "must precede the conversation" in error.message


def test_guidance_alone_is_no_conversation() -> None:
    error = refused(Message("system", "only"))
    assert (error.param, error.code) == ("messages", "invalid_message")


def test_a_user_message_needs_content() -> None:
    error = refused(Message("user", None))
    assert (error.param, error.code) == ("messages[0].content", "invalid_message")
    assert ok(Message("user", "")).turns[0].text == ""


def test_text_parts_join_in_every_spelling() -> None:
    parts = (Part("text", "a"), Part("input_text", "b"), Part("output_text", "c"))
    assert ok(Message("user", parts)).turns[0].text == "abc"


def test_a_non_text_part_is_refused_naming_the_part() -> None:
    error = refused(Message("user", (Part("text", "a"), Part("input_file"))))
    assert (error.param, error.code) == ("messages[0].content[1]", "unsupported_content")
    assert "'input_file'" in error.message


def test_a_text_part_needs_text() -> None:
    error = refused(Message("user", (Part("text"),)))
    assert error.param == "messages[0].content[0].text"


def test_tool_calls_only_on_assistant_messages() -> None:
    error = refused(Message("user", "hi", tool_calls=(call(),)))
    assert (error.param, error.code) == ("messages[0].tool_calls", "invalid_tool_call")


# -- tool calls in the history and their results -------------------------------------------------


def test_a_call_and_its_result_pair_up() -> None:
    validated = ok(*exchange(call("c1", "lookup"), call("c2", "read")))
    assert [t.role for t in validated.turns] == ["user", "assistant", "tool", "tool"]
    assert [(t.tool_call_id, t.name) for t in validated.turns[2:]] == [("c1", "lookup"), ("c2", "read")]


@pytest.mark.parametrize(
    ("bad", "param", "code"),
    [
        (call(id=""), "messages[1].tool_calls[0].id", "invalid_tool_call"),
        (call(name=""), "messages[1].tool_calls[0].function.name", "invalid_tool_call"),
        (call(arguments="{not json"), "messages[1].tool_calls[0].function.arguments", "invalid_tool_arguments"),
        (call(arguments="[1]"), "messages[1].tool_calls[0].function.arguments", "invalid_tool_arguments"),
        (call(arguments="[" * 100_000), "messages[1].tool_calls[0].function.arguments", "invalid_tool_arguments"),
    ],
    ids=["empty id", "empty name", "not json", "not an object", "nested past the parser"],
)
def test_a_bad_call_in_the_history(bad: ToolCall, param: str, code: str) -> None:
    error = refused(USER, Message("assistant", "", tool_calls=(bad,)))
    assert (error.param, error.code) == (param, code)


def test_blank_arguments_are_an_empty_object() -> None:
    validated = ok(*exchange(call(arguments="  ")))
    assert [(t.role, t.tool_call_id, t.name) for t in validated.turns] == [
        ("user", None, None),
        ("assistant", None, None),
        ("tool", "c1", "f"),
    ]
    assert validated.turns[1].tool_calls == (call(arguments="  "),)  # kept; the template renders it as {}
    assert refused(*exchange(call(arguments="[]"))).code == "invalid_tool_arguments"  # blank, not any non-object


def test_call_ids_are_unique_across_the_conversation() -> None:
    first, second = exchange(call("c1")), exchange(call("c1"))
    error = refused(*first, *second[1:])
    assert (error.param, error.code) == ("messages[3].tool_calls[0].id", "invalid_tool_call")


@pytest.mark.parametrize("tool_call_id", [None, "", "c9"])
def test_a_result_must_answer_an_open_call(tool_call_id: str | None) -> None:
    error = refused(USER, Message("tool", "r", tool_call_id=tool_call_id))
    assert (error.param, error.code) == ("messages[1].tool_call_id", "invalid_tool_result")


def test_a_call_is_answered_once() -> None:
    error = refused(*exchange(call("c1")), Message("tool", "again", tool_call_id="c1"))
    assert (error.param, error.code) == ("messages[3].tool_call_id", "invalid_tool_result")


def test_the_conversation_may_not_end_with_an_open_call() -> None:
    error = refused(USER, Message("assistant", "", tool_calls=(call("c2"), call("c1"))))
    assert (error.param, error.code) == ("messages", "invalid_tool_call")
    assert "(c1, c2)" in error.message


# -- where an error points: the client's own path, or the neutral one ------------------------------


def test_a_message_source_names_the_clients_own_item() -> None:
    message = Message("robot", "hi", source=Source("input[3]"))
    assert refused(message).param == "input[3].role"


def test_a_call_source_spells_the_clients_own_fields() -> None:
    source = Source("messages[1].content[2]", {"name": "name", "arguments": "input"})
    error = refused(USER, Message("assistant", "", tool_calls=(call(arguments="[]", source=source),)))
    assert error.param == "messages[1].content[2].input"


def test_a_part_source_names_the_clients_block() -> None:
    message = Message("user", (Part("image", source=Source("messages[0].content[4]")),))
    assert refused(message).param == "messages[0].content[4]"


def test_without_sources_the_neutral_paths_are_used() -> None:
    """A message a mapper built itself (no Source) is named ``<messages param>[i]``, beside client ones."""
    client = Message("user", "a", source=Source("input[0]"))
    with pytest.raises(InvalidRequest) as info:
        validate(ChatRequest(model="m", messages=(client, Message("x")), messages_param="input"), MODEL)
    assert info.value.param == "input[1].role"
    error = refused(USER, Message("assistant", "", tool_calls=(call(name=""),)))
    assert error.param == "messages[1].tool_calls[0].function.name"
    assert refused(tools=(Tool("bad name"),)).param == "tools[0].function.name"


# -- tools ---------------------------------------------------------------------------------------


def test_tools_pass_through() -> None:
    tools = (Tool("lookup", "Look it up.", SCHEMA), Tool("read"))
    assert ok(tools=tools).tools == tools


def test_too_many_tools() -> None:
    tools = tuple(Tool(f"t{i}") for i in range(MAX_TOOLS + 1))
    error = refused(tools=tools)
    assert (error.param, error.code) == ("tools", "value_too_large")
    assert len(ok(tools=tools[:MAX_TOOLS]).tools) == MAX_TOOLS


@pytest.mark.parametrize(
    ("tool", "param", "code"),
    [
        (Tool("f", type="web_search"), "tools[0].type", "unsupported_tool"),
        (Tool(""), "tools[0].function.name", "invalid_tool_name"),
        (Tool("a.b"), "tools[0].function.name", "invalid_tool_name"),
        (Tool("x" * 65), "tools[0].function.name", "invalid_tool_name"),
        (Tool("f", parameters={"type": "array"}), "tools[0].function.parameters", "invalid_tool_schema"),
        (Tool("f", parameters=NOT_A_SCHEMA), "tools[0].function.parameters", "invalid_tool_schema"),
    ],
    ids=["not a function", "empty name", "a dot", "65 characters", "not an object schema", "not a schema"],
)
def test_a_bad_tool(tool: Tool, param: str, code: str) -> None:
    error = refused(tools=(tool,))
    assert (error.param, error.code) == (param, code)


def test_tool_names_allow_letters_digits_underscore_dash_up_to_64() -> None:
    assert [t.name for t in ok(tools=(Tool("A-z_09"), Tool("x" * 64))).tools] == ["A-z_09", "x" * 64]
    error = refused(tools=(Tool("x" * 65),))
    assert (error.param, error.code) == ("tools[0].function.name", "invalid_tool_name")


def test_parameters_default_to_an_object_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinytitan.engine.grammar.schema import compile_schema

    compiled: list[Any] = []

    def recording(schema: dict[str, Any], param: str) -> str:
        compiled.append(schema)
        return compile_schema(schema, param)

    monkeypatch.setattr("tinytitan.engine.request.tools.compile_schema", recording)
    tools = (Tool("f", parameters={"properties": {}}), Tool("g"))
    assert ok(tools=tools).tools == tools  # passed on as sent: a schema without a type is an object's
    ok(tools=tools, tool_choice=ToolChoice("required"), model=FORCING)  # a forced call compiles each schema
    assert compiled == [{"properties": {}}, {"type": "object", "properties": {}}]  # none → an empty object's


def test_duplicate_tool_names() -> None:
    error = refused(tools=(Tool("f"), Tool("f")))
    assert (error.param, error.code) == ("tools[1].function.name", "invalid_tool_name")


def test_a_schema_nested_too_deep() -> None:
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(MAX_SCHEMA_DEPTH):
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]
    error = refused(tools=(Tool("f", parameters=deep, source=Source("tools[0]", {"parameters": "input_schema"})),))
    assert (error.param, error.code) == ("tools[0].input_schema", "value_too_large")


# -- tool choice ---------------------------------------------------------------------------------


def test_tool_choice_defaults_to_auto() -> None:
    validated = ok(tools=(Tool("f"),))
    assert (validated.tool_choice, validated.forced_tool, len(validated.tools)) == ("auto", None, 1)


def test_none_leaves_the_tools_out() -> None:
    validated = ok(tools=(Tool("f"),), tool_choice=ToolChoice("none"))
    assert (validated.tool_choice, validated.tools) == ("none", ())


@pytest.mark.parametrize(
    ("choice", "model", "tools", "code"),
    [
        (ToolChoice("any_of"), FORCING, (Tool("f"),), "invalid_value"),
        (ToolChoice("function"), FORCING, (Tool("f"),), "invalid_value"),
        (ToolChoice("required"), MODEL, (Tool("f"),), "unsupported_value"),
        (ToolChoice("function", "f"), MODEL, (Tool("f"),), "unsupported_value"),
        (ToolChoice("required"), FORCING, (), "invalid_value"),
        (ToolChoice("function", "g"), FORCING, (Tool("f"),), "invalid_value"),
    ],
    ids=[
        "unknown mode",
        "function without a name",
        "required on a model that cannot force",
        "named on a model that cannot force",
        "forcing without tools",
        "an unknown function",
    ],
)
def test_a_tool_choice_refused_naming_the_clients_field(
    choice: ToolChoice, model: ModelInfo, tools: tuple[Tool, ...], code: str
) -> None:
    error = refused(tools=tools, tool_choice=replace(choice, param="tool_choice.name"), model=model)
    assert (error.param, error.code) == ("tool_choice.name", code)


def test_forcing_on_a_model_that_can() -> None:
    required = ok(tools=(Tool("f"), Tool("g")), tool_choice=ToolChoice("required"), model=FORCING)
    assert (required.tool_choice, required.forced_tool) == ("required", None)
    named = ok(tools=(Tool("f"), Tool("g")), tool_choice=ToolChoice("function", "g"), model=FORCING)
    assert (named.tool_choice, named.forced_tool, len(named.tools)) == ("function", "g", 2)


UNIQUE = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}


def test_a_forced_call_refuses_a_schema_the_grammar_cannot_promise() -> None:
    tools = (Tool("f"), Tool("g", parameters=UNIQUE, source=Source("tools[1]", {"parameters": "input_schema"})))
    error = refused(tools=tools, tool_choice=ToolChoice("function", "g"), model=FORCING)
    assert (error.param, error.code) == ("tools[1].input_schema", "unsupported_value")
    error = refused(tools=tools, tool_choice=ToolChoice("required"), model=FORCING)
    assert error.param == "tools[1].input_schema"
    # only the forced tool's schema is compiled; unforced, the schema is just rendered
    ok(tools=tools, tool_choice=ToolChoice("function", "f"), model=FORCING)
    ok(tools=tools)


# -- reasoning -----------------------------------------------------------------------------------


def test_the_model_default_level_applies() -> None:
    assert ok().reasoning_level == "on"
    assert ok(reasoning=ReasoningControls(effort="none")).reasoning_level == "off"


@pytest.mark.parametrize(
    ("fields", "model"),
    [
        (
            {"output_format": FormatRequest("json_object", "response_format", "response_format.json_schema.schema")},
            MODEL,
        ),
        ({"tools": (Tool("f"),), "tool_choice": ToolChoice("required")}, FORCING),
        ({"tools": (Tool("f"),), "tool_choice": ToolChoice("function", "f")}, FORCING),
    ],
    ids=["structured output", "required", "named"],
)
def test_thinking_is_off_when_a_grammar_constrains_the_first_token(fields: dict[str, Any], model: ModelInfo) -> None:
    assert ok(reasoning=ReasoningControls(effort="high"), model=model, **fields).reasoning_level == "off"


# -- output format -------------------------------------------------------------------------------


def test_output_format_is_compiled() -> None:
    asked = FormatRequest("json_schema", "text.format", "text.format.schema", schema=SCHEMA, name="answer")
    fmt = ok(output_format=asked).output_format
    assert fmt is not None and (fmt.type, fmt.schema, fmt.name) == ("json_schema", SCHEMA, "answer")
    assert fmt.grammar
    assert ok().output_format is None


def test_an_unknown_output_format_names_the_clients_field() -> None:
    error = refused(output_format=FormatRequest("yaml", "output_config.format", "output_config.format.schema"))
    assert (error.param, error.code) == ("output_config.format.type", "unsupported_value")


# -- sampling ------------------------------------------------------------------------------------


def test_omitted_sampling_falls_back_to_the_conservative_server_default_not_another_familys() -> None:
    validated = ok()
    assert validated.sampling == Sampling(temperature=0.3, top_p=0.9, top_k=None)
    assert validated.sampling_from == {"temperature": SERVER_DEFAULT, "top_p": SERVER_DEFAULT}


def test_the_models_generation_config_wins_over_the_fallback() -> None:
    model = replace(MODEL, defaults={"temperature": 1, "top_k": 50, "repetition_penalty": 1.1})
    validated = ok(model=model)
    sampling = validated.sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.repetition_penalty) == (1.0, 0.9, 50, 1.1)
    assert validated.sampling_from == {
        "temperature": GENERATION_CONFIG,
        "top_p": SERVER_DEFAULT,
        "top_k": GENERATION_CONFIG,
        "repetition_penalty": GENERATION_CONFIG,
    }


def test_a_publisher_default_and_a_serve_flag_say_where_they_came_from() -> None:
    values, sources = model_defaults({"top_k": 40}, ["SmolLM2-135M-Instruct.Q4_1.gguf"])
    model = with_flags(replace(MODEL, defaults=values, defaults_from=sources), {"top_p": 0.5, "min_p": None})
    validated = ok(model=model, sampling=Sampling(seed=3))
    assert (validated.sampling.temperature, validated.sampling.top_p, validated.sampling.top_k) == (0.2, 0.5, 40)
    assert validated.sampling_from == {
        "temperature": "publisher: SmolLM2 model card",
        "top_p": SERVE_FLAG,
        "top_k": GENERATION_CONFIG,
    }


def test_the_clients_values_win_over_every_default() -> None:
    asked = Sampling(temperature=0.0, top_p=1.0, top_k=1, repetition_penalty=1.3, presence_penalty=-2.0, seed=7)
    model = replace(MODEL, defaults={"temperature": 1, "top_p": 0.5, "top_k": 50, "repetition_penalty": 1.1})
    validated = ok(sampling=asked, model=model)
    assert validated.sampling == asked
    assert set(validated.sampling_from.values()) == {REQUEST}


def test_a_model_without_a_tool_call_syntax_gets_no_tools_in_its_request() -> None:
    tool = Tool("get_weather", parameters={"type": "object"})
    assert ok(tools=(tool,)).tools == (tool,) and ok().tool_calls
    validated = ok(tools=(tool,), model=replace(MODEL, tool_calls=False))
    assert validated.tools == () and not validated.tool_calls


@pytest.mark.parametrize(
    ("sampling", "param", "code"),
    [
        (Sampling(temperature=-0.1), "temperature", "invalid_value"),
        (Sampling(temperature=2.01), "temperature", "invalid_value"),
        (Sampling(top_p=0.0), "top_p", "invalid_value"),
        (Sampling(top_p=1.01), "top_p", "invalid_value"),
        (Sampling(top_k=0), "top_k", "invalid_value"),
        (Sampling(top_k=257), "top_k", "invalid_value"),
        (Sampling(repetition_penalty=0.0), "repetition_penalty", "invalid_value"),
        (Sampling(presence_penalty=2.5), "presence_penalty", "invalid_value"),
        (Sampling(frequency_penalty=0.5), "frequency_penalty", "unsupported_value"),
        (Sampling(seed=-1), "seed", "invalid_value"),
        (Sampling(seed=2**64), "seed", "invalid_value"),
    ],
    ids=[
        "temperature below 0",
        "temperature above 2",
        "top_p 0",
        "top_p above 1",
        "top_k 0",
        "top_k 257",
        "repetition_penalty 0",
        "presence_penalty 2.5",
        "frequency_penalty",
        "negative seed",
        "seed 2**64",
    ],
)
def test_sampling_out_of_range(sampling: Sampling, param: str, code: str) -> None:
    error = refused(sampling=sampling)
    assert (error.param, error.code) == (param, code)


def test_the_range_is_in_the_message() -> None:
    assert refused(sampling=Sampling(top_p=0.0)).message == "top_p must be in (0, 1], got 0"
    assert refused(sampling=Sampling(temperature=3.0)).message == "temperature must be in [0, 2], got 3"


def test_the_edges_are_in_range() -> None:
    high = Sampling(temperature=2.0, top_p=1.0, top_k=256, presence_penalty=2.0, seed=2**64 - 1)
    assert ok(sampling=high).sampling == high
    low = Sampling(temperature=0.0, top_k=1, presence_penalty=-2.0, seed=0, frequency_penalty=0.0)
    assert ok(sampling=low).sampling == replace(low, top_p=0.9, frequency_penalty=None)  # the server default top_p


def test_a_zero_frequency_penalty_is_dropped() -> None:
    assert ok(sampling=Sampling(frequency_penalty=0.0)).sampling.frequency_penalty is None


def test_messages_temperature_max_and_top_p_zero() -> None:
    """Anthropic's ranges: temperature [0, 1], top_p [0, 1] (0 is in range there)."""
    error = refused(sampling=Sampling(temperature=1.5), temperature_max=1.0)
    assert error.message == "temperature must be in [0, 1], got 1.5"
    assert ok(sampling=Sampling(top_p=0.0), top_p_zero=True).sampling.top_p == 0.0
    assert refused(sampling=Sampling(top_p=-0.1), top_p_zero=True).message == "top_p must be in [0, 1], got -0.1"


# -- the output cap ------------------------------------------------------------------------------


@pytest.mark.parametrize("cap_param", ["max_tokens", "max_completion_tokens", "max_output_tokens"])
def test_the_cap_is_clamped_to_the_context_window_on_every_protocol(cap_param: str) -> None:
    """reference §4 "Ours": Claude Code sends 32,000 and pi 16,384 on every request."""
    assert ok(max_tokens=32_000, cap_param=cap_param).cap == MODEL.context_window
    assert ok(max_tokens=999, cap_param=cap_param).cap == 999
    assert ok(cap_param=cap_param).cap == MODEL.context_window


@pytest.mark.parametrize("cap", [0, -1])
@pytest.mark.parametrize("cap_param", ["max_tokens", "max_completion_tokens", "max_output_tokens"])
def test_a_cap_below_one_is_refused_by_its_own_name(cap_param: str, cap: int) -> None:
    error = refused(max_tokens=cap, cap_param=cap_param)
    assert (error.param, error.message) == (cap_param, f"{cap_param} must be greater than 0, got {cap}")


# -- stop ----------------------------------------------------------------------------------------


def test_stop_defaults_to_none_and_drops_duplicates_in_order() -> None:
    assert ok().stop == ()
    assert ok(stop=("b", "a", "b")).stop == ("b", "a")


@pytest.mark.parametrize(
    "stop",
    [("a", "b", "c", "d", "e"), ("a", ""), ("é" * 129,)],
    ids=["five strings", "an empty string", "257 bytes in 129 characters"],
)
def test_bad_stop_strings_name_the_protocols_field(stop: tuple[str, ...]) -> None:
    assert refused(stop=stop, stop_param="stop_sequences").param == "stop_sequences"


def test_stop_bytes_count_each_distinct_string_once() -> None:
    assert ok(stop=("é" * 128, "é" * 128)).stop == ("é" * 128,)  # 256 bytes
