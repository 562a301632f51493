"""Chat Completions answers (reference §8) as msgspec structs: the completion object and the chunks.

A stream is chunks, an error frame (``tinytitan.api.wire.OpenAIError``) when it fails, then the
string ``[DONE]``. Pure data.
"""

from __future__ import annotations

from typing import Literal

from tinytitan.api.wire import UNSET, Answer, OpenAIError, UnsetType

__all__ = [
    "STREAM_EVENTS",
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatUsage",
    "Choice",
    "ChunkChoice",
    "CompletionTokensDetails",
    "CustomCall",
    "Delta",
    "FunctionCall",
    "PromptTokensDetails",
    "ToolCallObject",
]


class PromptTokensDetails(Answer):
    cached_tokens: int


class CompletionTokensDetails(Answer):
    reasoning_tokens: int


class ChatUsage(Answer):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class FunctionCall(Answer):
    name: str
    arguments: str


class CustomCall(Answer):
    name: str
    input: str


class ToolCallObject(Answer, kw_only=True):
    """A tool call; in a chunk it carries its ``index`` among the stream's calls. A custom tool's call
    is ``type: "custom"`` with ``custom`` (its name and input) instead of ``function``."""

    index: int | UnsetType = UNSET
    id: str
    type: Literal["function", "custom"] = "function"
    function: FunctionCall | UnsetType = UNSET
    custom: CustomCall | UnsetType = UNSET


class AssistantMessage(Answer, kw_only=True):
    role: Literal["assistant"] = "assistant"
    content: str | None  # null when the answer is only tool calls
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallObject] | UnsetType = UNSET


class _Choice(Answer, kw_only=True):
    index: int = 0
    logprobs: None = None
    finish_reason: str | None = None


class Choice(_Choice, kw_only=True):
    message: AssistantMessage
    finish_reason: str


class _Head(Answer, kw_only=True):
    """What the completion and each chunk begin with."""

    id: str
    object: str
    created: int
    model: str


class ChatCompletion(_Head, kw_only=True):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[Choice]
    usage: ChatUsage


class Delta(Answer):
    """What a chunk adds: only the fields it has (``{}`` in the finish chunk)."""

    role: Literal["assistant"] | UnsetType = UNSET
    content: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallObject] | UnsetType = UNSET


class ChunkChoice(_Choice, kw_only=True):
    delta: Delta


class ChatCompletionChunk(_Head, kw_only=True):
    """A chunk: one choice with a delta, or (the usage chunk) no choice and the ``usage``."""

    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChunkChoice]
    usage: ChatUsage | UnsetType = UNSET


STREAM_EVENTS: tuple[type, ...] = (ChatCompletionChunk, OpenAIError)
"""What a stream's ``data:`` lines decode as (besides the closing ``[DONE]``)."""
