"""Pure-function tests of the Chat Completions translator (reference §8): mapping, the chunk stream
(``ChatStream`` over hand-made event iterators) and the completion object."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from tinytitan.api.chat_completions import encode
from tinytitan.api.chat_completions.encode import ChatStream
from tinytitan.api.chat_completions.mapping import to_chat_request
from tinytitan.api.chat_completions.protocol import ChatCompletionRequest
from tinytitan.engine.errors import GenerationFailed, InvalidRequest
from tinytitan.engine.events import Event, Finished, ReasoningDelta, Source, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import ChatRequest, FormatRequest, ToolChoice
from tinytitan.testing.events import as_sent, encoded


def usage_object(usage: Usage) -> Any:
    """The usage object as sent (the encoder builds a struct)."""
    return as_sent(encode.usage_object(usage))


def completion_object(result: Completion, model: str) -> Any:
    """The completion object as sent (the encoder builds a struct)."""
    return as_sent(encode.completion_object(result, model))


MODEL = "stub-model"
USER = {"role": "user", "content": "hi"}
USAGE = Usage(prompt_tokens=10, cached_tokens=4, completion_tokens=6, reasoning_tokens=2)
CALL = ToolCall("call_1", "lookup", '{"q": "x"}')
CHUNK_ID = re.compile(r"^chatcmpl-[0-9a-f]{32}$")


def mapped(**fields: Any) -> ChatRequest:
    return to_chat_request(msgspec.convert({"model": MODEL, "messages": [USER], **fields}, ChatCompletionRequest))


def refusal(**fields: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        mapped(**fields)
    return info.value


# -- mapping -------------------------------------------------------------------------------------


def test_messages_carry_their_own_paths() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    request = mapped(
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "hm"},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]
    )
    user, assistant, tool = request.messages
    assert user.source == Source("messages[0]")
    assert isinstance(user.content, tuple) and [p.source for p in user.content] == [
        Source("messages[0].content[0]"),
        Source("messages[0].content[1]"),
    ]
    (history,) = assistant.tool_calls
    assert (history.id, history.name, history.arguments) == ("c1", "f", "{}")
    assert history.source is not None and history.source.at("name") == "messages[1].tool_calls[0].function.name"
    assert assistant.reasoning == "hm"
    assert (tool.role, tool.tool_call_id, tool.content) == ("tool", "c1", "done")


def test_tools_carry_the_chat_spelling() -> None:
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}
    (mapped_tool,) = mapped(tools=[tool]).tools
    assert (mapped_tool.name, mapped_tool.description, mapped_tool.parameters) == ("f", "d", {"type": "object"})
    assert mapped_tool.source is not None and mapped_tool.source.at("parameters") == "tools[0].function.parameters"
    assert refusal(tools=[{"type": "function"}]).param == "tools[0].function"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, None),
        ("auto", ToolChoice("auto")),
        ("none", ToolChoice("none")),
        ("required", ToolChoice("required")),
        ({"type": "function", "function": {"name": "f"}}, ToolChoice("function", "f")),
        ({"type": "function", "name": "f"}, ToolChoice("function", "f")),  # the Responses spelling, tolerated
        ({"type": "function"}, ToolChoice("function")),  # the validator names what is missing
    ],
)
def test_tool_choice(choice: Any, expected: ToolChoice | None) -> None:
    assert mapped(tool_choice=choice).tool_choice == expected


@pytest.mark.parametrize("choice", ["any", {"type": "tool", "name": "f"}])
def test_an_unknown_tool_choice_is_refused(choice: Any) -> None:
    assert refusal(tool_choice=choice).param == "tool_choice"


@pytest.mark.parametrize("fmt", [None, {"type": "text"}, "json"])
def test_plain_text_formats(fmt: Any) -> None:
    assert mapped(response_format=fmt).output_format is None


def test_a_json_schema_format_says_where_its_schema_is() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}
    assert mapped(response_format=fmt).output_format == FormatRequest(
        "json_schema", "response_format", "response_format.json_schema.schema", {"type": "object"}, "answer"
    )


def test_the_cap_and_its_name() -> None:
    assert (mapped().max_tokens, mapped().cap_param) == (None, "max_tokens")
    assert (mapped(max_tokens=5).max_tokens, mapped(max_tokens=5).cap_param) == (5, "max_tokens")
    newer = mapped(max_completion_tokens=7)
    assert (newer.max_tokens, newer.cap_param) == (7, "max_completion_tokens")
    assert refusal(max_tokens=5, max_completion_tokens=7).param == "max_completion_tokens"


def test_stop_as_a_string_or_a_list() -> None:
    assert mapped(stop="END").stop == ("END",)
    assert mapped(stop=["a", "b"]).stop == ("a", "b")
    assert mapped().stop is None


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"reasoning_effort": 1}, "chat_template_kwargs.reasoning_effort"),
        ({"enable_thinking": "yes"}, "chat_template_kwargs.enable_thinking"),
    ],
)
def test_template_kwargs_of_the_wrong_type(kwargs: dict[str, Any], param: str) -> None:
    error = refusal(chat_template_kwargs=kwargs)
    assert (error.param, error.code) == (param, "invalid_json")


def test_reasoning_controls_in_every_spelling() -> None:
    controls = mapped(
        reasoning_effort="high",
        reasoning_budget_tokens=100,
        chat_template_kwargs={"reasoning_effort": "low", "enable_thinking": False},
    ).reasoning
    assert (controls.effort, controls.template_effort, controls.enable_thinking, controls.budget_tokens) == (
        "high",
        "low",
        False,
        100,
    )


@pytest.mark.parametrize(("body", "param"), [({"messages": [USER]}, "model"), ({"model": MODEL}, "messages")])
def test_model_and_messages_are_required(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        to_chat_request(msgspec.convert(body, ChatCompletionRequest))
    assert info.value.param == param


# -- the chunk stream ------------------------------------------------------------------------------


def chunks(items: list[Event | BaseException], *, include_usage: bool = False) -> list[Any]:
    return [frame.data for frame in encoded(items, ChatStream(MODEL, include_usage=include_usage))]


def test_role_first_then_deltas_then_the_finish_chunk_and_done() -> None:
    sent = chunks([ReasoningDelta("hm"), TextDelta("Hel"), TextDelta("lo"), Finished("stop", USAGE)])
    assert sent[-1] == "[DONE]"
    objects = sent[:-1]
    assert [c["choices"][0]["delta"] for c in objects] == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "hm"},
        {"content": "Hel"},
        {"content": "lo"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in objects] == [None, None, None, None, "stop"]
    assert {c["id"] for c in objects} == {objects[0]["id"]} and CHUNK_ID.match(objects[0]["id"])
    assert {(c["object"], c["model"], c["created"]) for c in objects} == {
        ("chat.completion.chunk", MODEL, objects[0]["created"])
    }
    assert all(c["choices"][0]["index"] == 0 and c["choices"][0]["logprobs"] is None for c in objects)


def test_tool_calls_are_indexed_in_order_and_finish_as_tool_calls() -> None:
    second = ToolCall("call_2", "read", "{}")
    sent = chunks([TextDelta("Calling."), CALL, second, Finished("stop")])
    calls = [c["choices"][0]["delta"]["tool_calls"] for c in sent[2:4]]
    assert calls == [
        [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
        [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
    ]
    assert sent[4]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(("reason", "wire"), [("stop", "stop"), ("length", "length"), ("tool_calls", "stop")])
def test_finish_reasons(reason: str, wire: str) -> None:
    assert chunks([Finished(reason)])[-2]["choices"][0]["finish_reason"] == wire


def test_the_usage_chunk_only_when_asked() -> None:
    sent = chunks([TextDelta("a"), Finished("stop", USAGE)], include_usage=True)
    usage_chunk = sent[-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == usage_object(USAGE)
    assert sent[-3]["choices"][0]["finish_reason"] == "stop"
    assert not any("usage" in c for c in chunks([Finished("stop", USAGE)])[:-1])


def test_a_failure_is_an_error_frame_then_done() -> None:
    sent = chunks([TextDelta("a"), GenerationFailed()])
    assert sent[-2:] == [
        {"error": {"message": "generation failed", "type": "server_error", "code": "internal_error"}},
        "[DONE]",
    ]


def test_usage_object() -> None:
    assert usage_object(USAGE) == {
        "prompt_tokens": 10,
        "completion_tokens": 6,
        "total_tokens": 16,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


# -- the completion object ------------------------------------------------------------------------


def completion(
    reasoning: str = "", text: str = "", calls: tuple[ToolCall, ...] = (), reason: str = "stop"
) -> Completion:
    finished = Finished(reason, USAGE)
    return Completion(reasoning, text, list(calls), finished, [*calls, finished])


def test_a_text_answer() -> None:
    obj = completion_object(completion(text="hello"), MODEL)
    assert CHUNK_ID.match(obj.pop("id"))
    assert isinstance(obj.pop("created"), int)
    assert obj == {
        "object": "chat.completion",
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello"},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage_object(USAGE),
    }


def test_reasoning_and_calls_without_text() -> None:
    message = completion_object(completion(reasoning="hm", calls=(CALL,)), MODEL)["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    assert message["message"] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "hm",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
    }


def test_text_beside_calls_is_kept() -> None:
    message = completion_object(completion(text="Calling.", calls=(CALL,)), MODEL)["choices"][0]["message"]
    assert message["content"] == "Calling." and len(message["tool_calls"]) == 1


def test_a_capped_answer_finishes_with_length() -> None:
    assert completion_object(completion(text="a", reason="length"), MODEL)["choices"][0]["finish_reason"] == "length"


def test_the_encoders_object_is_the_completion_object() -> None:
    obj = as_sent(ChatStream(MODEL, include_usage=False).object(completion(text="hi")))
    assert obj["choices"][0]["message"]["content"] == "hi" and obj["model"] == MODEL
