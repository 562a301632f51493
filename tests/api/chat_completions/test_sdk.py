"""The official ``openai`` SDK as a strict wire checker for Chat Completions."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import openai
import pytest
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer

Serve = Callable[..., AbstractContextManager[LiveServer]]
Client = tuple[openai.OpenAI, LiveServer]

RULES = (
    {"when": {"last_role": "tool"}, "reply": {"text": "The weather in Oslo is 4 degrees."}},
    {
        "when": {"user_contains": "weather"},
        "reply": {
            "reasoning": "The user wants weather; call the tool.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
    },
    {"reply": {"reasoning": "A greeting.", "text": "Hello! How can I help?"}},
)
WEATHER_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def the_call(message: ChatCompletionMessage) -> ChatCompletionMessageFunctionToolCall:
    """The message's one tool call, a function call."""
    assert message.tool_calls is not None and len(message.tool_calls) == 1, message.tool_calls
    call = message.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    return call


def extra(message: ChatCompletionMessage, field: str) -> Any:
    """A field the SDK does not model (our ``reasoning_content``)."""
    assert message.model_extra is not None
    return message.model_extra[field]


def raw(value: dict[str, Any]) -> Any:
    """A turn as the JSON an agent sends back (a dumped SDK object), not as the SDK's own type."""
    return value


@pytest.fixture
def client(serve: Serve) -> Iterator[Client]:
    with serve(script(*RULES)) as live:
        yield openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0), live


def test_stream_accumulates_to_the_non_streaming_message(client: Client) -> None:
    sdk, _ = client
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    plain = sdk.chat.completions.create(model=STUB_MODEL, messages=messages)
    with sdk.chat.completions.stream(
        model=STUB_MODEL, messages=messages, stream_options={"include_usage": True}
    ) as stream:
        streamed = stream.get_final_completion()
    assert streamed.choices[0].message.content == plain.choices[0].message.content == "Hello! How can I help?"
    assert streamed.choices[0].finish_reason == plain.choices[0].finish_reason == "stop"
    assert streamed.usage is not None and plain.usage is not None
    assert streamed.usage.completion_tokens == plain.usage.completion_tokens
    details = plain.usage.completion_tokens_details
    assert details is not None and (details.reasoning_tokens or 0) > 0
    assert extra(plain.choices[0].message, "reasoning_content") == "A greeting."


def test_tool_round_trip(client: Client) -> None:
    sdk, live = client
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = sdk.chat.completions.create(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = the_call(choice.message)
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Oslo"}
    messages.append(raw(choice.message.model_dump(exclude_none=True)))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "4 degrees"})
    second = sdk.chat.completions.create(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "The weather in Oslo is 4 degrees."
    recorded = live.recorded[-1]["messages"]
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool"]
    assert recorded[2] == {"role": "tool", "content": "4 degrees", "tool_calls": [], "tool_call_id": call.id}


def test_streamed_tool_call_matches(client: Client) -> None:
    sdk, _ = client
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "weather?"}]
    plain = sdk.chat.completions.create(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL])
    with sdk.chat.completions.stream(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_completion()
    call = the_call(final.choices[0].message)
    assert call.function.name == "get_weather"
    assert final.choices[0].finish_reason == plain.choices[0].finish_reason == "tool_calls"
    plain_call = the_call(plain.choices[0].message)
    assert (call.function.name, call.function.arguments) == (plain_call.function.name, plain_call.function.arguments)
    assert extra(final.choices[0].message, "reasoning_content") == "The user wants weather; call the tool."
    assert "tool_calls.function.arguments.done" in kinds


def test_tool_round_trip_through_streams(client: Client) -> None:
    """What a streaming agent does: the accumulated assistant turn goes back with the tool's result."""
    sdk, live = client
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    with sdk.chat.completions.stream(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL]) as stream:
        first = stream.get_final_completion()
    call = the_call(first.choices[0].message)
    messages.append(
        {
            "role": "assistant",
            "content": first.choices[0].message.content,
            "tool_calls": [raw(call.model_dump(include={"id", "type", "function"}))],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "4 degrees"})
    with sdk.chat.completions.stream(model=STUB_MODEL, messages=messages, tools=[WEATHER_TOOL]) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        second = stream.get_final_completion()
    assert "".join(deltas) == second.choices[0].message.content == "The weather in Oslo is 4 degrees."
    assert second.choices[0].finish_reason == "stop"
    recorded = live.recorded[-1]["messages"]
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool"]
    assert recorded[1]["tool_calls"][0]["id"] == recorded[2]["tool_call_id"] == call.id


def test_errors_surface_as_typed_exceptions(client: Client) -> None:
    sdk, _ = client
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model=STUB_MODEL, messages=[{"role": "user", "content": "hi"}], temperature=3)
    assert info.value.param == "temperature"
