"""The official ``anthropic`` SDK as a strict wire checker against a live server (no /v1 on base_url)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.types import MessageParam, RawContentBlockDeltaEvent, TextBlock, ToolUseBlock

from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer

from .support import CONTEXT, MODEL, RULES, WEATHER_TOOL

Serve = Callable[..., AbstractContextManager[LiveServer]]
USER: list[MessageParam] = [{"role": "user", "content": "please think about 2+2"}]


def raw(block: dict[str, Any]) -> Any:
    """A block as the JSON a client sends back (what Claude Code does), not as the SDK's own type."""
    return block


def error_body(error: anthropic.APIStatusError) -> dict[str, Any]:
    assert isinstance(error.body, dict), error.body  # the envelope, decoded
    return error.body


def client_for(server: LiveServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


@pytest.fixture
def client(server: LiveServer) -> Iterator[anthropic.Anthropic]:
    with client_for(server) as sdk:
        yield sdk


def comparable(message: anthropic.types.Message) -> dict[str, Any]:
    """The message without what legitimately differs between two calls: ids and the cache split."""
    data = message.model_dump()
    data.pop("id")
    for block in data["content"]:
        if block["type"] == "tool_use":
            block.pop("id")
    usage = data.pop("usage")
    data["prompt_tokens"] = usage["input_tokens"] + usage["cache_read_input_tokens"]
    data["output_tokens"] = usage["output_tokens"]
    return data


def test_create_without_streaming(client: anthropic.Anthropic) -> None:
    message = client.messages.create(model=MODEL, max_tokens=1024, messages=USER)
    assert message.id.startswith("msg_") and message.model == MODEL and message.role == "assistant"
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.signature == ""
    assert thinking.thinking.strip() == "Two plus two."
    assert text.type == "text" and text.text == "The answer is 4."
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.usage.cache_creation_input_tokens == 0 and message.usage.output_tokens > 0


def test_create_with_streaming_yields_typed_events(client: anthropic.Anthropic) -> None:
    events = list(client.messages.create(model=MODEL, max_tokens=1024, messages=USER, stream=True))
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    deltas = [e.delta.type for e in events if isinstance(e, RawContentBlockDeltaEvent)]
    assert "thinking_delta" in deltas and "signature_delta" in deltas and "text_delta" in deltas


@pytest.mark.parametrize(
    "request_fields",
    [
        {"messages": USER},
        {"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": [WEATHER_TOOL]},
        {"messages": [{"role": "user", "content": "count please"}], "stop_sequences": ["STOP"]},
        {"messages": [{"role": "user", "content": "count please"}], "max_tokens": 2},
    ],
    ids=["thinking+text", "tool_use", "stop_sequence", "max_tokens"],
)
def test_stream_accumulates_to_the_non_streaming_message(
    client: anthropic.Anthropic, request_fields: dict[str, Any]
) -> None:
    fields = {"model": MODEL, "max_tokens": 1024, **request_fields}
    plain = client.messages.create(**fields)
    with client.messages.stream(**fields) as stream:
        streamed = stream.get_final_message()
    assert comparable(streamed) == comparable(plain)


def test_tool_use_round_trip(server: LiveServer, client: anthropic.Anthropic) -> None:
    question: MessageParam = {"role": "user", "content": "what is the weather in Paris?"}
    first = client.messages.create(model=MODEL, max_tokens=1024, messages=[question], tools=[WEATHER_TOOL])
    assert first.stop_reason == "tool_use"
    call = first.content[-1]
    assert isinstance(call, ToolUseBlock) and call.name == "get_weather" and call.input == {"city": "Paris"}
    second = client.messages.create(
        model=MODEL,
        max_tokens=1024,
        tools=[WEATHER_TOOL],
        messages=[
            question,
            {"role": "assistant", "content": [raw(block.model_dump()) for block in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": "sunny, 21C"}]}
                ],
            },
        ],
    )
    assert second.stop_reason == "end_turn"
    answer = second.content[0]
    assert isinstance(answer, TextBlock) and answer.text == "It is sunny in Paris."
    recorded = server.recorded[-1]
    assert [m["role"] for m in recorded["messages"]] == ["user", "assistant", "tool"]
    assert recorded["messages"][1]["tool_calls"][0]["id"] == call.id
    assert recorded["messages"][2]["tool_call_id"] == call.id
    assert recorded["messages"][2]["content"] == "sunny, 21C"


def test_tool_use_round_trip_through_streams(server: LiveServer, client: anthropic.Anthropic) -> None:
    """What Claude Code does: the accumulated streamed turn goes back with the tool_result."""
    question: MessageParam = {"role": "user", "content": "what is the weather in Paris?"}
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=[question], tools=[WEATHER_TOOL]) as stream:
        json_deltas = [e.partial_json for e in stream if e.type == "input_json"]
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    thinking, call = first.content
    assert thinking.type == "thinking" and thinking.thinking == "I should call the tool." and thinking.signature == ""
    assert isinstance(call, ToolUseBlock) and call.input == {"city": "Paris"} and json_deltas
    turns: list[MessageParam] = [
        question,
        {"role": "assistant", "content": [raw(block.model_dump(exclude_none=True)) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21C"}]},
    ]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=turns, tools=[WEATHER_TOOL]) as stream:
        text = "".join(stream.text_stream)
        second = stream.get_final_message()
    assert text == "It is sunny in Paris." and second.stop_reason == "end_turn"
    recorded = server.recorded[-1]["messages"]
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool"]
    assert recorded[1]["tool_calls"][0]["id"] == recorded[2]["tool_call_id"] == call.id


def test_count_tokens(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(model=MODEL, messages=USER, tools=[WEATHER_TOOL])
    assert counted.input_tokens > client.messages.count_tokens(model=MODEL, messages=USER).input_tokens > 0


def test_bad_request_is_bad_request_error(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=1024, messages=USER, extra_body={"temperature": 1.5})
    assert info.value.status_code == 400
    assert error_body(info.value)["error"]["message"].startswith("temperature: ")
    assert info.value.request_id == error_body(info.value)["request_id"]


def test_unknown_model_is_not_found_error(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=USER)
    assert error_body(info.value)["error"]["type"] == "not_found_error"


def test_no_tokenizer_is_a_501_status_error(serve: Serve) -> None:
    with (
        serve(script(*RULES, context_window=CONTEXT, tokenizer=False)) as server,
        client_for(server) as sdk,
        pytest.raises(anthropic.APIStatusError) as info,
    ):
        sdk.messages.count_tokens(model=MODEL, messages=USER)
    assert info.value.status_code == 501 and error_body(info.value)["error"]["type"] == "api_error"


def test_full_queue_is_overloaded_error(serve: Serve) -> None:
    with serve(queue_limit=0) as server, client_for(server) as sdk, httpx.Client(timeout=30) as http:
        slow = {
            "model": MODEL,
            "max_tokens": 1024,
            "stream": True,
            "messages": [{"role": "user", "content": "slow please"}],
        }
        with http.stream("POST", server.url + "/v1/messages", json=slow) as running:
            lines = running.iter_lines()
            assert next(lines) == "event: message_start"  # the one slot is taken
            with pytest.raises(anthropic.InternalServerError) as info:
                sdk.messages.create(model=MODEL, max_tokens=1024, messages=USER)
    assert info.value.status_code == 529
    assert isinstance(info.value, anthropic.OverloadedError)  # this SDK maps 529 to its own class
    assert error_body(info.value)["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert info.value.response.headers["retry-after"].isdigit()


def test_failure_mid_stream_raises_from_the_stream(client: anthropic.Anthropic) -> None:
    with (
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(
            model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "fail now"}]
        ) as stream,
    ):
        stream.get_final_message()
    assert error_body(info.value)["type"] == "error" and error_body(info.value)["error"]["type"] == "api_error"


def test_models_list_and_retrieve(client: anthropic.Anthropic) -> None:
    listed = client.models.list()
    assert [m.id for m in listed.data] == [MODEL]
    model = client.models.retrieve(MODEL)
    assert model.id == MODEL and model.type == "model"
