"""Engine → Chat Completions: events become stream chunks, a collected run the completion object (reference §8)."""

from __future__ import annotations

import time

from tinytitan.api.errors import openai_error
from tinytitan.api.sse import SSE
from tinytitan.api.wire import UNSET, UnsetType
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, ToolSearched, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import new_id

from .wire import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatUsage,
    Choice,
    ChunkChoice,
    CompletionTokensDetails,
    CustomCall,
    Delta,
    FunctionCall,
    PromptTokensDetails,
    ToolCallObject,
)

__all__ = ["ChatStream", "completion_object", "finish_reason", "usage_object"]


def usage_object(usage: Usage) -> ChatUsage:
    return ChatUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        prompt_tokens_details=PromptTokensDetails(usage.cached_tokens),
        completion_tokens_details=CompletionTokensDetails(usage.reasoning_tokens),
    )


def finish_reason(finished: Finished, has_calls: bool) -> str:
    if has_calls:
        return "tool_calls"
    return "length" if finished.reason == "length" else "stop"


def _call_object(call: ToolCall, index: int | UnsetType = UNSET) -> ToolCallObject:
    if call.type == "custom":
        return ToolCallObject(index=index, id=call.id, type="custom", custom=CustomCall(call.name, call.arguments))
    return ToolCallObject(index=index, id=call.id, function=FunctionCall(call.name, call.arguments))


def completion_object(result: Completion, model: str) -> ChatCompletion:
    message = AssistantMessage(content=result.text or (None if result.tool_calls else result.text))
    if result.reasoning:
        message.reasoning_content = result.reasoning
    if result.tool_calls:
        message.tool_calls = [_call_object(c) for c in result.tool_calls]
    reason = finish_reason(result.finished, bool(result.tool_calls))
    return ChatCompletion(
        id=new_id("chatcmpl-"),
        created=int(time.time()),
        model=model,
        choices=[Choice(message=message, finish_reason=reason)],
        usage=usage_object(result.finished.usage),
    )


class ChatStream:
    """The chunk stream (reference §8): role first (at once, even while queued), deltas, the finish
    chunk, the usage chunk when asked, and ``[DONE]`` — after a failure's error frame too."""

    def __init__(self, model: str, *, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.calls = 0

    def _chunk(self, delta: Delta, reason: str | None = None) -> SSE:
        return SSE(self._frame([ChunkChoice(delta=delta, finish_reason=reason)]))

    def _frame(self, choices: list[ChunkChoice], usage: ChatUsage | UnsetType = UNSET) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=self.id, created=self.created, model=self.model, choices=choices, usage=usage)

    def start(self) -> list[SSE]:
        return [self._chunk(Delta(role="assistant", content=""))]

    def feed(self, event: Event) -> list[SSE]:
        if isinstance(event, TextDelta):
            return [self._chunk(Delta(content=event.text))]
        if isinstance(event, ReasoningDelta):
            return [self._chunk(Delta(reasoning_content=event.text))]
        if isinstance(event, ToolCall):
            self.calls += 1
            return [self._chunk(Delta(tool_calls=[_call_object(event, self.calls - 1)]))]
        if isinstance(event, ToolSearched):
            return []  # Chat Completions has no server tools: its mapper never offers a search
        out = [self._chunk(Delta(), finish_reason(event, self.calls > 0))]
        if self.include_usage:
            out.append(SSE(self._frame([], usage_object(event.usage))))
        return out

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return [SSE(openai_error(exc)[1])]

    def end(self) -> list[SSE]:
        return [SSE("[DONE]")]

    def keepalive(self) -> None:
        return None  # a comment line: Chat Completions has no event a client would ignore

    def object(self, result: Completion) -> ChatCompletion:
        return completion_object(result, self.model)
