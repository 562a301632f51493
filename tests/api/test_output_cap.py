"""The output cap on every protocol (reference §4 "Ours"): above the context window it is clamped,
never refused — Claude Code sends 32,000 and pi 16,384 on every request — and below one it is
refused by the protocol's own field name. The real mappers feed the one validator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from tinytitan.api.anthropic.mapping import to_chat_request as from_messages
from tinytitan.api.anthropic.protocol import MessagesRequest
from tinytitan.api.chat_completions.mapping import to_chat_request as from_chat
from tinytitan.api.chat_completions.protocol import ChatCompletionRequest
from tinytitan.api.responses.mapping import to_chat_request as from_responses
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest, ModelInfo
from tinytitan.engine.request.validate import validate

CONTEXT = 4096
MODEL = ModelInfo("m", context_window=CONTEXT)
USER = {"role": "user", "content": "hi"}


def chat(field: str) -> Callable[[int], ChatRequest]:
    return lambda cap: from_chat(msgspec.convert({"model": "m", "messages": [USER], field: cap}, ChatCompletionRequest))


def responses(cap: int) -> ChatRequest:
    wire = msgspec.convert({"model": "m", "input": "hi", "max_output_tokens": cap}, ResponsesRequest)
    return from_responses(wire, history=[], resolve=lambda _id: None)[0]


def messages(cap: int) -> ChatRequest:
    wire = msgspec.convert({"model": "m", "messages": [USER], "max_tokens": cap}, MessagesRequest)
    return from_messages(wire, context_window=CONTEXT)


PROTOCOLS: list[Any] = [
    pytest.param(chat("max_tokens"), "max_tokens", id="chat max_tokens"),
    pytest.param(chat("max_completion_tokens"), "max_completion_tokens", id="chat max_completion_tokens"),
    pytest.param(responses, "max_output_tokens", id="responses"),
    pytest.param(messages, "max_tokens", id="messages"),
]


@pytest.mark.parametrize(("mapped", "param"), PROTOCOLS)
def test_a_cap_above_the_context_window_is_clamped(mapped: Callable[[int], ChatRequest], param: str) -> None:
    assert validate(mapped(32_000), MODEL).cap == CONTEXT
    assert validate(mapped(16_384), MODEL).cap == CONTEXT
    assert validate(mapped(100), MODEL).cap == 100


@pytest.mark.parametrize(("mapped", "param"), PROTOCOLS)
def test_a_cap_below_one_is_refused_by_the_protocols_name(mapped: Callable[[int], ChatRequest], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        validate(mapped(0), MODEL)
    assert info.value.param == param
