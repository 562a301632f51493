"""Engine → Chat Completions: events become stream chunks, a collected run the completion object (reference §8)."""

from __future__ import annotations

import time
from typing import Any

from tinytitan.api.errors import openai_error
from tinytitan.api.sse import SSE
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import new_id

__all__ = ["ChatStream", "completion_object", "finish_reason", "usage_object"]


def usage_object(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def finish_reason(finished: Finished, has_calls: bool) -> str:
    if has_calls:
        return "tool_calls"
    return "length" if finished.reason == "length" else "stop"


def _call_object(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {} if index is None else {"index": index}
    obj.update({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
    return obj


def completion_object(result: Completion, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = [_call_object(c) for c in result.tool_calls]
        if not result.text:
            message["content"] = None
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(result.finished, bool(result.tool_calls)),
            }
        ],
        "usage": usage_object(result.finished.usage),
    }


class ChatStream:
    """The chunk stream (reference §8): role first (at once, even while queued), deltas, the finish
    chunk, the usage chunk when asked, and ``[DONE]`` — after a failure's error frame too."""

    def __init__(self, model: str, *, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.calls = 0

    def _chunk(self, delta: dict[str, Any], reason: str | None = None) -> SSE:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return SSE(self._frame(choices=[choice]))

    def _frame(self, **fields: Any) -> dict[str, Any]:
        head = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}
        return {**head, **fields}

    def start(self) -> list[SSE]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, event: Event) -> list[SSE]:
        if isinstance(event, TextDelta):
            return [self._chunk({"content": event.text})]
        if isinstance(event, ReasoningDelta):
            return [self._chunk({"reasoning_content": event.text})]
        if isinstance(event, ToolCall):
            self.calls += 1
            return [self._chunk({"tool_calls": [_call_object(event, self.calls - 1)]})]
        out = [self._chunk({}, finish_reason(event, self.calls > 0))]
        if self.include_usage:
            out.append(SSE(self._frame(choices=[], usage=usage_object(event.usage))))
        return out

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return [SSE(openai_error(exc)[1])]

    def end(self) -> list[SSE]:
        return [SSE("[DONE]")]

    def keepalive(self) -> None:
        return None  # a comment line: Chat Completions has no event a client would ignore

    def object(self, result: Completion) -> dict[str, Any]:
        return completion_object(result, self.model)
