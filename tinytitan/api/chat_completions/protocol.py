"""Chat Completions wire types (requests). Pure data: no engine imports.

Unknown fields are ignored (clients send many); a field of the wrong JSON type is a decode error.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ChatCompletionRequest",
    "ChatContentPart",
    "ChatCustomCall",
    "ChatCustomTool",
    "ChatFunction",
    "ChatFunctionCall",
    "ChatMessage",
    "ChatTool",
    "ChatToolCall",
    "StreamOptions",
]


class ChatImageUrl(msgspec.Struct, omit_defaults=True):
    url: str
    detail: str | None = None  # auto, low, high


class ChatContentPart(msgspec.Struct, omit_defaults=True):
    type: str
    text: str | None = None
    refusal: str | None = None  # an assistant's refusal part: text like any other
    image_url: ChatImageUrl | str | None = (
        None  # an image_url part's picture (a data URL; http(s) with --allow-image-urls)
    )


class ChatFunctionCall(msgspec.Struct, omit_defaults=True):
    name: str = ""
    arguments: str = ""


class ChatCustomCall(msgspec.Struct, omit_defaults=True):
    name: str = ""
    input: str = ""


class ChatToolCall(msgspec.Struct, omit_defaults=True):
    id: str = ""
    type: str = "function"
    function: ChatFunctionCall = msgspec.field(default_factory=ChatFunctionCall)
    custom: ChatCustomCall | None = None  # a custom tool's call (type "custom")


class ChatMessage(msgspec.Struct, omit_defaults=True):
    role: str
    content: str | list[ChatContentPart] | None = None
    name: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class ChatFunction(msgspec.Struct, omit_defaults=True):
    name: str = ""
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatCustomTool(msgspec.Struct, omit_defaults=True):
    name: str = ""
    description: str | None = None
    format: Any = None  # {"type": "text"} or {"type": "grammar", "grammar": {"syntax", "definition"}}


class ChatTool(msgspec.Struct, omit_defaults=True):
    type: str = "function"
    function: ChatFunction | None = None
    custom: ChatCustomTool | None = None


class StreamOptions(msgspec.Struct, omit_defaults=True):
    include_usage: bool | None = None


class ChatCompletionRequest(msgspec.Struct, omit_defaults=True):
    model: str | None = None
    messages: list[ChatMessage] | None = None
    tools: list[ChatTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    reasoning_effort: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    reasoning_budget_tokens: int | None = None
    response_format: Any = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
