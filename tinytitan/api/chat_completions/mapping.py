"""Chat Completions → engine: the wire request becomes a ``ChatRequest`` (reference §8)."""

from __future__ import annotations

from tinytitan.api.images import image_part
from tinytitan.api.shapes import custom_format, format_request, openai_tool_choice, sampling_of
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source, ToolCall
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    Part,
    ReasoningControls,
    Tool,
)

from .protocol import ChatCompletionRequest, ChatContentPart, ChatMessage, ChatTool, ChatToolCall

__all__ = ["to_chat_request"]

_CALL_SPELLING = {"name": "function.name", "arguments": "function.arguments"}
_TOOL_SPELLING = {"name": "function.name", "parameters": "function.parameters"}
_CUSTOM_CALL_SPELLING = {"name": "custom.name", "arguments": "custom.input"}
_CUSTOM_TOOL_SPELLING = {"name": "custom.name", "format": "custom.format"}


def _part(part: ChatContentPart, where: str) -> Part:
    """A content part; an assistant's ``refusal`` part is text like any other; an ``image_url`` part
    an image to check (``image_part``)."""
    if part.type == "image_url":
        if part.image_url is None:
            raise InvalidRequest("an image_url part needs an 'image_url' object", param=f"{where}.image_url")
        if isinstance(part.image_url, str):  # the bare URL some clients send
            return image_part(part.image_url, f"{where}.image_url", where)
        return image_part(part.image_url.url, f"{where}.image_url.url", where, detail=part.image_url.detail)
    if part.type == "refusal":
        return Part("text", part.refusal, Source(where, {"text": "refusal"}))
    return Part(part.type, part.text, Source(where))


def _call(c: ChatToolCall, where: str) -> ToolCall:
    """An assistant's tool call: a function's, or a custom tool's (``type: "custom"``, its ``custom.input``)."""
    if c.type == "custom":
        if c.custom is None:
            raise InvalidRequest("a custom tool call needs a 'custom' object", param=f"{where}.custom")
        source = Source(where, _CUSTOM_CALL_SPELLING)
        return ToolCall(c.id, c.custom.name, c.custom.input, source=source, type="custom")
    return ToolCall(c.id, c.function.name, c.function.arguments, source=Source(where, _CALL_SPELLING))


def _message(m: ChatMessage, i: int) -> Message:
    where = f"messages[{i}]"
    content = (
        tuple(_part(p, f"{where}.content[{j}]") for j, p in enumerate(m.content))
        if isinstance(m.content, list)
        else m.content
    )
    calls = tuple(_call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(m.tool_calls or ()))
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


def _custom_tool(t: ChatTool, where: str) -> Tool:
    if t.custom is None:
        raise InvalidRequest("a custom tool needs a 'custom' object", param=f"{where}.custom")
    return Tool(
        name=t.custom.name,
        description=t.custom.description or "",
        type="custom",
        source=Source(where, _CUSTOM_TOOL_SPELLING),
        format=custom_format(t.custom.format, param=f"{where}.custom.format"),
    )


def _tools(wire: ChatCompletionRequest) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    for i, t in enumerate(wire.tools or ()):
        if t.type == "custom":
            tools.append(_custom_tool(t, f"tools[{i}]"))
            continue
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
