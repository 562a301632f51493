"""Chat Completions answers (reference §8) as msgspec structs: the completion object and the chunks.

A stream is chunks, an error frame (``tinytitan.api.wire.OpenAIError``) when it fails, then the
string ``[DONE]``. Pure data.
"""

from __future__ import annotations

from typing import Literal

from tinytitan.api.wire import UNSET, Answer, OpenAIError, UnsetType

__all__ = [
    "STREAM_EVENTS",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatMessage",
    "ChatUsage",
    "Choice",
    "ChunkChoice",
    "CompletionTokensDetails",
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


class ToolCallObject(Answer, kw_only=True):
    """A tool call; in a chunk it carries its ``index`` among the stream's calls."""

    index: int | UnsetType = UNSET
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(Answer, kw_only=True):
    role: Literal["assistant"] = "assistant"
    content: str | None  # null when the answer is only tool calls
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallObject] | UnsetType = UNSET


class Choice(Answer, kw_only=True):
    index: int = 0
    message: ChatMessage
    logprobs: None = None
    finish_reason: str


class ChatCompletion(Answer, kw_only=True):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: ChatUsage


class Delta(Answer):
    """What a chunk adds: only the fields it has (``{}`` in the finish chunk)."""

    role: Literal["assistant"] | UnsetType = UNSET
    content: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallObject] | UnsetType = UNSET


class ChunkChoice(Answer, kw_only=True):
    index: int = 0
    delta: Delta
    logprobs: None = None
    finish_reason: str | None = None


class ChatCompletionChunk(Answer, kw_only=True):
    """A chunk: one choice with a delta, or (the usage chunk) no choice and the ``usage``."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | UnsetType = UNSET


STREAM_EVENTS: tuple[type, ...] = (ChatCompletionChunk, OpenAIError)
"""What a stream's ``data:`` lines decode as (besides the closing ``[DONE]``)."""
