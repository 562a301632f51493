"""Chat Completions ↔ engine: wire request → ``ChatRequest``; engine events → chunks / object (reference §8)."""

from __future__ import annotations

import time
from typing import Any

from tinytitan.api.errors import openai_error
from tinytitan.api.shapes import format_request, openai_tool_choice, sampling_of
from tinytitan.api.sse import SSE
from tinytitan.engine.errors import InvalidRequest, TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, Source, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    Part,
    ReasoningControls,
    Tool,
    new_id,
)

from .protocol import ChatCompletionRequest, ChatContentPart, ChatMessage

__all__ = ["ChatStream", "completion_object", "finish_reason", "to_chat_request", "usage_object"]

_CALL_SPELLING = {"name": "function.name", "arguments": "function.arguments"}
_TOOL_SPELLING = {"name": "function.name", "parameters": "function.parameters"}


def _part(part: ChatContentPart, where: str) -> Part:
    """A content part; an assistant's ``refusal`` part is text like any other."""
    if part.type == "refusal":
        return Part("text", part.refusal, Source(where, {"text": "refusal"}))
    return Part(part.type, part.text, Source(where))


def _message(m: ChatMessage, i: int) -> Message:
    where = f"messages[{i}]"
    content = (
        tuple(_part(p, f"{where}.content[{j}]") for j, p in enumerate(m.content))
        if isinstance(m.content, list)
        else m.content
    )
    calls = tuple(
        ToolCall(c.id, c.function.name, c.function.arguments, source=Source(f"{where}.tool_calls[{k}]", _CALL_SPELLING))
        for k, c in enumerate(m.tool_calls or ())
    )
    return Message(
        role=m.role,
        content=content,
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        reasoning=m.reasoning_content or m.reasoning,
        source=Source(where),
    )


def _reasoning(wire: ChatCompletionRequest) -> ReasoningControls:
    kwargs = wire.chat_template_kwargs or {}
    effort = kwargs.get("reasoning_effort")
    thinking = kwargs.get("enable_thinking")
    if effort is not None and not isinstance(effort, str):
        raise InvalidRequest(
            "chat_template_kwargs.reasoning_effort must be a string",
            param="chat_template_kwargs.reasoning_effort",
            code="invalid_json",
        )
    if thinking is not None and not isinstance(thinking, bool):
        raise InvalidRequest(
            "chat_template_kwargs.enable_thinking must be a boolean",
            param="chat_template_kwargs.enable_thinking",
            code="invalid_json",
        )
    return ReasoningControls(
        effort=wire.reasoning_effort,
        template_effort=effort,
        enable_thinking=thinking,
        budget_tokens=wire.reasoning_budget_tokens,
    )


def _tools(wire: ChatCompletionRequest) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    for i, t in enumerate(wire.tools or ()):
        if t.type == "function" and t.function is None:
            raise InvalidRequest("a function tool needs a 'function' object", param=f"tools[{i}].function")
        fn = t.function
        tools.append(
            Tool(
                name=fn.name if fn else "",
                description=(fn.description or "") if fn else "",
                parameters=fn.parameters if fn else None,
                type=t.type,
                source=Source(f"tools[{i}]", _TOOL_SPELLING),
            )
        )
    return tuple(tools)


def _cap(wire: ChatCompletionRequest) -> tuple[int | None, str]:
    if wire.max_tokens is not None and wire.max_completion_tokens is not None:
        raise InvalidRequest("give either max_tokens or max_completion_tokens, not both", param="max_completion_tokens")
    if wire.max_completion_tokens is not None:
        return wire.max_completion_tokens, "max_completion_tokens"
    return wire.max_tokens, "max_tokens"


def to_chat_request(wire: ChatCompletionRequest, *, workspace: str | None = None) -> ChatRequest:
    if not wire.model:
        raise InvalidRequest("model is required", param="model")
    if wire.messages is None:
        raise InvalidRequest("messages is required", param="messages")
    cap, cap_param = _cap(wire)
    return ChatRequest(
        model=wire.model,
        messages=tuple(_message(m, i) for i, m in enumerate(wire.messages)),
        tools=_tools(wire),
        tool_choice=openai_tool_choice(wire.tool_choice),
        sampling=sampling_of(wire),
        stop=(wire.stop,) if isinstance(wire.stop, str) else None if wire.stop is None else tuple(wire.stop),
        max_tokens=cap,
        cap_param=cap_param,
        reasoning=_reasoning(wire),
        output_format=format_request(wire.response_format, param="response_format", nested="json_schema"),
        n=wire.n,
        logprobs=wire.logprobs,
        top_logprobs=wire.top_logprobs,
        stream=bool(wire.stream),
        include_usage=wire.stream_options.include_usage if wire.stream_options else None,
        workspace=workspace,
    )


# -- responses ------------------------------------------------------------------------------------


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
