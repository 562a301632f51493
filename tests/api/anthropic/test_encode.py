"""Pure-function tests of the Messages translator (reference §12): mapping and both encoders."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from tinytitan.api.anthropic import encode
from tinytitan.api.anthropic.encode import MessagesStream, stop_reason, tool_use_id
from tinytitan.api.anthropic.mapping import to_chat_request
from tinytitan.api.anthropic.protocol import MessagesRequest
from tinytitan.engine.errors import GenerationFailed, InvalidRequest
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import ChatRequest, FormatRequest, ToolChoice
from tinytitan.testing.events import as_sent, encoded

from .support import MODEL, body


def usage_object(usage: Usage) -> Any:
    """The usage object as sent (the encoder builds a struct)."""
    return as_sent(encode.usage_object(usage))


def message_object(result: Completion, model: str, *, message_id: str | None = None) -> Any:
    """The message object as sent (the encoder builds a struct)."""
    return as_sent(encode.message_object(result, model, message_id=message_id))


BILLING = "x-anthropic-billing-header: cc_version=2.1.3.abc; cc_entrypoint=sdk-cli;"


def mapped(request: dict[str, Any], **kwargs: Any) -> ChatRequest:
    return to_chat_request(msgspec.convert(request, MessagesRequest), **kwargs)


def refusal(request: dict[str, Any], **kwargs: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        mapped(request, **kwargs)
    return info.value


# -- mapping: system, messages -----------------------------------------------------------------------


def test_system_blocks_and_inner_system_messages_join_the_leading_system_block() -> None:
    request = body(
        system=[
            {"type": "text", "text": BILLING, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "You are a coding agent."},
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        ],
        messages=[
            {"role": "system", "content": "Working directory: /abs/project"},
            {"role": "user", "content": "hi"},
        ],
    )
    messages = mapped(request).messages
    assert [m.role for m in messages] == ["system", "system", "system", "user"]
    assert [m.content for m in messages[:3]] == [
        "You are a coding agent.",
        "Be brief.",
        "Working directory: /abs/project",
    ]


def test_the_billing_line_is_dropped_from_a_string_system_too() -> None:
    messages = mapped(body(system=BILLING + "\nYou are helpful.")).messages
    assert messages[0].content == "You are helpful."


def test_inner_system_after_the_conversation_still_joins_the_system_block() -> None:
    request = body(
        messages=[
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": [{"type": "text", "text": "late guidance"}]},
            {"role": "user", "content": "two"},
        ]
    )
    assert [(m.role, m.content) for m in mapped(request).messages] == [
        ("system", "late guidance"),
        ("user", "one"),
        ("assistant", "ok"),
        ("user", "two"),
    ]


def test_consecutive_user_turns_merge_and_text_blocks_join() -> None:
    request = body(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": "first"},
                ],
            },
            {"role": "user", "content": "second"},
        ]
    )
    messages = mapped(request).messages
    assert len(messages) == 1
    assert messages[0].role == "user"
    assert messages[0].content == "<system-reminder>ctx</system-reminder>\n\nfirst\n\nsecond"


def test_tool_use_and_tool_result_become_a_call_and_tool_messages() -> None:
    request = body(
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "call it", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "20C"}],
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no clock", "is_error": True},
                    {"type": "text", "text": "thanks"},
                ],
            },
        ]
    )
    user, assistant, first, second, after = mapped(request).messages
    assert user.role == "user"
    assert assistant.content == "Checking."
    assert assistant.reasoning == "call it"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in assistant.tool_calls] == [
        ("toolu_1", "get_weather", {"city": "Paris"}),
        ("toolu_2", "get_time", {}),
    ]
    assert (first.role, first.tool_call_id, first.content) == ("tool", "toolu_1", "sunny\n20C")
    assert (second.role, second.tool_call_id, second.content) == ("tool", "toolu_2", "Error: no clock")
    assert (after.role, after.content) == ("user", "thanks")


def test_fields_use_anthropic_spellings_and_messages_rules() -> None:
    chat = mapped(
        body(
            stop_sequences=["END"],
            temperature=0.5,
            top_p=0.9,
            top_k=40,
            max_tokens=32000,
            metadata={"user_id": json.dumps({"device_id": "abc", "session_id": "s"})},
            service_tier="auto",
            context_management={"edits": [{"type": "clear_thinking_20251015"}]},
        )
    )
    assert chat.stop == ("END",)
    assert (chat.sampling.temperature, chat.sampling.top_p, chat.sampling.top_k) == (0.5, 0.9, 40)
    assert chat.max_tokens == 32000 and chat.top_p_zero and chat.temperature_max == 1.0
    assert (chat.stop_param, chat.cap_param) == ("stop_sequences", "max_tokens")


def test_custom_tools_keep_their_schema_and_drop_decorations() -> None:
    tool = {
        "name": "Read",
        "description": "Read a file",
        "type": "custom",
        "strict": True,
        "cache_control": {"type": "ephemeral"},
        "eager_input_streaming": True,
        "input_examples": [{}],
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    (mapped_tool,) = mapped(body(tools=[tool])).tools
    assert (mapped_tool.name, mapped_tool.description) == ("Read", "Read a file")
    assert mapped_tool.type == "function"
    assert mapped_tool.parameters == tool["input_schema"]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, ToolChoice("auto")),
        ({"type": "none"}, ToolChoice("none")),
        ({"type": "any"}, ToolChoice("required")),
        ({"type": "tool", "name": "Read"}, ToolChoice("function", "Read")),
        ({"type": "auto", "disable_parallel_tool_use": False}, ToolChoice("auto")),
    ],
)
def test_tool_choice_maps_to_the_neutral_choice(choice: dict[str, Any], expected: ToolChoice) -> None:
    assert mapped(body(tool_choice=choice)).tool_choice == expected


@pytest.mark.parametrize(
    ("thinking", "level"),
    [
        ({"type": "disabled"}, "off"),
        ({"type": "enabled", "budget_tokens": 1024}, "low"),
        ({"type": "enabled", "budget_tokens": 4095}, "low"),
        ({"type": "enabled", "budget_tokens": 4096}, "medium"),
        ({"type": "enabled", "budget_tokens": 16383}, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, "xhigh"),
        ({"type": "adaptive"}, None),
    ],
)
def test_thinking_maps_onto_the_ladder(thinking: dict[str, Any], level: str | None) -> None:
    chat = mapped(body(thinking=thinking, max_tokens=32000))
    assert chat.reasoning.level == level


def test_effort_is_accepted_and_leaves_the_server_default() -> None:
    chat = mapped(body(output_config={"effort": "high"}, thinking={"type": "adaptive"}))
    assert chat.reasoning.level is None and chat.output_format is None


def test_the_budget_rule_sees_max_tokens_after_clamping() -> None:
    request = body(thinking={"type": "enabled", "budget_tokens": 20000}, max_tokens=32000)
    assert mapped(request).reasoning.level == "xhigh"  # no context known: compared with 32000
    error = refusal(request, context_window=16384)
    assert error.param == "thinking.budget_tokens"


def test_count_tokens_does_not_need_max_tokens() -> None:
    request = body(thinking={"type": "enabled", "budget_tokens": 2048})
    del request["max_tokens"]
    assert mapped(request, count_only=True).reasoning.level == "low"
    assert refusal(request).param == "max_tokens"


def test_output_config_format_maps_to_a_format_request_in_anthropic_spelling() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    chat = mapped(body(output_config={"format": {"type": "json_schema", "schema": schema}}))
    expected = FormatRequest("json_schema", "output_config.format", "output_config.format.schema", schema, "output")
    assert chat.output_format == expected


def test_billing_line_only_goes_when_it_leads_the_block() -> None:
    text = "Guidance.\nx-anthropic-billing-header: not at the start"
    assert mapped(body(system=text)).messages[0].content == text


def test_the_request_id_is_carried() -> None:
    assert mapped(body(), request_id="req_abc").request_id == "req_abc"


# -- the object ----------------------------------------------------------------------------------------

CALL = ToolCall("call_ABC123", "get_weather", '{"city": "Paris"}')
USAGE = Usage(prompt_tokens=100, cached_tokens=60, completion_tokens=12, reasoning_tokens=5)


def test_message_object_orders_thinking_text_tool_use() -> None:
    result = Completion("hmm", "Checking.", [CALL], Finished("tool_calls", USAGE), [])
    obj = message_object(result, MODEL, message_id="msg_" + "0" * 32)
    assert obj == {
        "id": "msg_" + "0" * 32,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": ""},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_ABC123", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 40,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 60,
            "output_tokens": 12,
        },
    }


def test_message_object_has_a_text_block_unless_there_are_only_calls() -> None:
    empty = message_object(Completion("", "", [], Finished("stop"), []), MODEL)
    assert empty["content"] == [{"type": "text", "text": ""}]
    only_calls = message_object(Completion("", "", [CALL], Finished("tool_calls"), []), MODEL)
    assert [b["type"] for b in only_calls["content"]] == ["tool_use"]
    assert empty["id"].startswith("msg_") and len(empty["id"]) == 4 + 32


@pytest.mark.parametrize(
    ("finished", "has_calls", "expected"),
    [
        (Finished("length", stop_sequence="END"), True, ("tool_use", None)),
        (Finished("length", stop_sequence="END"), False, ("max_tokens", None)),
        (Finished("stop", stop_sequence="END"), False, ("stop_sequence", "END")),
        (Finished("stop"), False, ("end_turn", None)),
    ],
)
def test_stop_reason_precedence(finished: Finished, has_calls: bool, expected: tuple[str, Any]) -> None:
    assert stop_reason(finished, has_calls) == expected


def test_usage_excludes_the_cached_prefix_from_input_tokens() -> None:
    assert usage_object(USAGE) == {
        "input_tokens": 40,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 60,
        "output_tokens": 12,
    }


def test_tool_use_ids_are_stable_per_call() -> None:
    assert tool_use_id(CALL) == tool_use_id(CALL) == "toolu_ABC123"


# -- the stream ----------------------------------------------------------------------------------------


def stream(items: Iterable[Event | Exception]) -> list[tuple[str | None, dict[str, Any]]]:
    return [(sse.event, sse.data) for sse in encoded(items, MessagesStream(MODEL, request_id="req_x"))]


def test_stream_grammar_thinking_text_tool_use() -> None:
    frames = stream(
        [
            ReasoningDelta("hm"),
            ReasoningDelta("m"),
            TextDelta("Check"),
            TextDelta("ing."),
            CALL,
            Finished("tool_calls", USAGE),
        ]
    )
    assert [event for event, _ in frames] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == event for event, data in frames)
    start = frames[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["output_tokens"] == 0
    deltas = [d["delta"] for e, d in frames if e == "content_block_delta"]
    assert deltas == [
        {"type": "thinking_delta", "thinking": "hm"},
        {"type": "thinking_delta", "thinking": "m"},
        {"type": "signature_delta", "signature": ""},
        {"type": "text_delta", "text": "Check"},
        {"type": "text_delta", "text": "ing."},
        {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'},
    ]
    starts = [d for e, d in frames if e == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2]
    assert starts[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert starts[2]["content_block"] == {"type": "tool_use", "id": "toolu_ABC123", "name": "get_weather", "input": {}}
    delta = {"stop_reason": "tool_use", "stop_sequence": None}
    assert frames[-2][1] == {"type": "message_delta", "delta": delta, "usage": usage_object(USAGE)}


def test_stream_without_any_output_still_has_an_empty_text_block() -> None:
    frames = stream([Finished("stop", stop_sequence="END")])
    assert [e for e, _ in frames] == [
        "message_start",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert frames[1][1]["content_block"] == {"type": "text", "text": ""}
    assert frames[3][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


def test_a_failure_mid_stream_is_one_error_event_and_the_end() -> None:
    frames = stream([TextDelta("partial"), GenerationFailed()])
    assert [e for e, _ in frames] == ["message_start", "content_block_start", "content_block_delta", "error"]
    assert frames[-1][1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "generation failed"},
        "request_id": "req_x",
    }


def test_an_unexpected_exception_mid_stream_does_not_leak_details() -> None:
    frames = stream([RuntimeError("secret traceback detail")])
    assert frames[-1][0] == "error"
    assert "secret" not in json.dumps(frames[-1][1])
