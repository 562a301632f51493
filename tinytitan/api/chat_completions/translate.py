"""Chat Completions ↔ engine: wire request → ``ChatRequest``; engine events → chunks / object (reference §8)."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from tinytitan.api.errors import openai_error
from tinytitan.api.sse import SSE
from tinytitan.engine.errors import GenerationFailed, InvalidRequest, TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    Part,
    ReasoningControls,
    Sampling,
    Tool,
    ToolCallSpec,
)
from tinytitan.engine.service import Completion

from .protocol import ChatCompletionRequest, ChatMessage

__all__ = ["completion_object", "finish_reason", "stream_chunks", "to_chat_request", "usage_object"]


def _message(m: ChatMessage) -> Message:
    content = tuple(Part(p.type, p.text) for p in m.content) if isinstance(m.content, list) else m.content
    calls = tuple(ToolCallSpec(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or ())
    return Message(
        role=m.role,
        content=content,
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        reasoning=m.reasoning_content or m.reasoning,
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


def to_chat_request(wire: ChatCompletionRequest, *, workspace: str | None = None) -> ChatRequest:
    if not wire.model:
        raise InvalidRequest("model is required", param="model")
    if wire.messages is None:
        raise InvalidRequest("messages is required", param="messages")
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
            )
        )
    stop = wire.stop if wire.stop is None or isinstance(wire.stop, str) else tuple(wire.stop)
    return ChatRequest(
        model=wire.model,
        messages=tuple(_message(m) for m in wire.messages),
        tools=tuple(tools),
        tool_choice=wire.tool_choice,
        sampling=Sampling(
            temperature=wire.temperature,
            top_p=wire.top_p,
            top_k=wire.top_k,
            repetition_penalty=wire.repetition_penalty,
            presence_penalty=wire.presence_penalty,
            frequency_penalty=wire.frequency_penalty,
            seed=wire.seed,
        ),
        stop=stop,
        max_tokens=wire.max_tokens,
        max_completion_tokens=wire.max_completion_tokens,
        reasoning=_reasoning(wire),
        response_format=wire.response_format,
        n=wire.n,
        logprobs=wire.logprobs,
        top_logprobs=wire.top_logprobs,
        stream=bool(wire.stream),
        include_usage=wire.stream_options.include_usage if wire.stream_options else None,
        workspace=workspace,
    )


# -- responses ------------------------------------------------------------------------------------


def new_completion_id() -> str:
    return "chatcmpl-" + secrets.token_hex(16)


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
    obj.update({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}})
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
        "id": new_completion_id(),
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


async def stream_chunks(events: AsyncIterator[Event], model: str, *, include_usage: bool) -> AsyncIterator[SSE]:
    """The chunk stream: role first (at once, even while queued), deltas, finish, usage, [DONE]."""
    cid, created = new_completion_id(), int(time.time())

    def chunk(delta: dict[str, Any], reason: str | None = None) -> SSE:
        return SSE(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}],
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    calls = 0
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                yield chunk({"content": event.text})
            elif isinstance(event, ReasoningDelta):
                yield chunk({"reasoning_content": event.text})
            elif isinstance(event, ToolCall):
                yield chunk({"tool_calls": [_call_object(event, calls)]})
                calls += 1
            elif isinstance(event, Finished):
                yield chunk({}, finish_reason(event, calls > 0))
                if include_usage:
                    yield SSE(
                        {
                            "id": cid,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": usage_object(event.usage),
                        }
                    )
    except TinyTitanError as exc:
        yield SSE(openai_error(exc)[1])
    except Exception:
        yield SSE(openai_error(GenerationFailed())[1])
    yield SSE("[DONE]")
