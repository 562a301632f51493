"""Responses request → ``ChatRequest`` (reference §9): input items, tools, tool choice, format, refusals.

``map_input`` turns ``input`` (a string or items) into guidance, decoded compaction notes and
conversation messages, plus the items a stored response keeps: each checked field by field (errors
name ``input[i]…``) and parsed ONCE into an ``items.InputItem``. ``map_items`` maps items already
parsed (a stored conversation, for ``previous_response_id``) without reading JSON again.
``to_chat_request`` adds the rest of the request. Everything the one validator checks is left to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from tinytitan.api.shapes import format_request, openai_tool_choice, sampling_of
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source, ToolCall
from tinytitan.engine.passes.payload import decode_payload, summary_preamble
from tinytitan.engine.passes.server_side import note_turn
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    ReasoningControls,
    Tool,
    new_id,
)

from .content import check_content, content_of
from .items import (
    InputCustomToolCallItem,
    InputCustomToolCallOutputItem,
    InputFunctionCallItem,
    InputFunctionCallOutputItem,
    InputItem,
    InputMessageItem,
    InputReasoningItem,
    InputToolSearchCallItem,
    InputToolSearchOutputItem,
)
from .protocol import ResponsesRequest
from .tool_search import (
    check_call_item,
    check_output_item,
    output_message,
    output_tools,
    search_call,
    with_loaded,
)
from .tools import map_tools

__all__ = [
    "ALLOWED_INCLUDE",
    "EFFORTS",
    "MappedInput",
    "Resolver",
    "map_input",
    "map_items",
    "map_tools",
    "new_item_id",
    "to_chat_request",
]

ALLOWED_INCLUDE = ("reasoning.encrypted_content", "message.output_text.logprobs")
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # OpenAI's reasoning.effort values
SUMMARIES = ("auto", "concise", "detailed")
VERBOSITIES = ("low", "medium", "high")
TRUNCATIONS = ("auto", "disabled")
_ROLES = ("user", "system", "developer", "assistant")
_ID_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "compaction": "cmp",
    "tool_search_call": "tsc",
    "tool_search_output": "tso",
    "custom_tool_call": "ctc",
    "custom_tool_call_output": "ctco",
}

Resolver = Callable[[str], InputItem | None]
"""An ``item_reference`` id → the stored item it names (None: no such item)."""


def new_item_id(kind: str) -> str:
    return new_id(f"{_ID_PREFIX.get(kind, 'item')}_")


@dataclass
class MappedInput:
    guidance: list[str] = field(default_factory=list)  # system / developer texts, in order
    notes: list[str] = field(default_factory=list)  # decoded compaction summaries
    messages: list[Message] = field(default_factory=list)  # user / assistant / tool
    items: list[InputItem] = field(default_factory=list)  # the items, parsed (ids filled)
    thought: str | None = None  # a replayed reasoning item, for the assistant turn that follows it
    cut: bool = False  # a server-side compaction note replaced the conversation before it
    found: list[Tool] = field(default_factory=list)  # tools tool_search_output items loaded (deferred)
    searching: list[str] = field(default_factory=list)  # tool_search_call ids no output answered yet

    def extend(self, other: MappedInput) -> None:
        if other.cut:  # the note in ``other`` stands for everything before it, here too
            self.notes, self.messages, self.cut = [], [], True
        self.guidance += other.guidance
        self.notes += other.notes
        self.messages += other.messages
        self.items += other.items
        self.found += other.found


def _kind(item: dict[str, Any], where: str) -> str:
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    if "role" in item and "content" in item:
        return "message"
    if "call_id" in item and "output" in item:
        return "function_call_output"
    if "name" in item and "arguments" in item:
        return "function_call"
    if "name" in item and "input" in item and "call_id" in item:
        return "custom_tool_call"
    raise InvalidRequest("an input item needs a type", param=f"{where}.type", code="invalid_value")


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{key} is required", param=f"{where}.{key}")
    return value


def _parsed(item: dict[str, Any], kind: str, where: str) -> InputItem:
    """A checked item as its struct: ``type`` and ``id`` filled, a string ``content`` made one part."""
    out = dict(item)
    out["type"] = kind
    if not isinstance(out.get("id"), str) or not out["id"]:
        out["id"] = new_item_id(kind)
    if kind == "message" and isinstance(out.get("content"), str):
        part = "output_text" if out.get("role") == "assistant" else "input_text"
        out["content"] = [{"type": part, "text": out["content"]}]
    try:
        parsed: InputItem = msgspec.convert(out, InputItem)
    except msgspec.ValidationError as exc:  # a field the checks above leave to the struct (a status, a part)
        detail, _, path = str(exc).partition(" - at `$")
        raise InvalidRequest(f"invalid {kind} item: {detail}", param=where + path.removesuffix("`")) from None
    return parsed


def _take_thought(mapped: MappedInput) -> str | None:
    thought, mapped.thought = mapped.thought, None
    return thought


def _thought_text(item: InputReasoningItem) -> str:
    """A reasoning item's readable text: its summary parts, else its reasoning_text content."""
    texts = [part.text for part in item.summary] if isinstance(item.summary, list) else []
    if not texts and isinstance(item.content, list):
        texts = [part.text for part in item.content]
    return "\n\n".join(texts)


def _add_call(mapped: MappedInput, call: ToolCall, where: str) -> None:
    last = mapped.messages[-1] if mapped.messages else None
    if last is not None and last.role == "assistant" and mapped.thought is None:
        mapped.messages[-1] = replace(last, tool_calls=(*last.tool_calls, call))
    else:
        reasoning = _take_thought(mapped)
        mapped.messages.append(Message("assistant", "", tool_calls=(call,), reasoning=reasoning, source=Source(where)))


def _parse_item(item: dict[str, Any], where: str, resolve: Resolver) -> InputItem:
    """One input item checked (errors name ``where``) and parsed; a reference is the item it names."""
    kind = _kind(item, where)
    if kind == "item_reference":
        ref = _string(item, "id", where)
        found = resolve(ref)
        if found is None:
            raise InvalidRequest(f"Item with id '{ref}' not found.", param=f"{where}.id", code="item_not_found")
        return found
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            raise InvalidRequest(
                f"unknown message role {role!r}; expected one of {', '.join(_ROLES)}",
                param=f"{where}.role",
                code="invalid_message",
            )
        if item.get("content") is None:
            raise InvalidRequest("a message item needs content", param=f"{where}.content", code="invalid_message")
        check_content(item["content"], f"{where}.content")
    elif kind == "function_call":
        if not isinstance(item.get("arguments", ""), str):
            raise InvalidRequest("arguments must be a JSON string", param=f"{where}.arguments")
        _string(item, "call_id", where)
        _string(item, "name", where)
    elif kind == "function_call_output":
        check_content(item.get("output"), f"{where}.output")
        _string(item, "call_id", where)
    elif kind == "tool_search_call":
        check_call_item(item, where)
    elif kind == "tool_search_output":
        check_output_item(item, where)
    elif kind == "custom_tool_call":
        if not isinstance(item.get("input"), str):
            raise InvalidRequest("a custom tool call's input must be a string", param=f"{where}.input")
        _string(item, "call_id", where)
        _string(item, "name", where)
    elif kind == "custom_tool_call_output":
        check_content(item.get("output"), f"{where}.output")
        _string(item, "call_id", where)
    elif kind == "compaction_trigger":  # the last item asks for a compaction turn; elsewhere it means nothing
        raise InvalidRequest("a compaction_trigger item must be the last input item", param=f"{where}.type")
    elif kind not in ("reasoning", "compaction"):
        raise InvalidRequest(
            f"input items of type '{kind}' are not supported", param=f"{where}.type", code="unsupported_value"
        )
    return _parsed(item, kind, where)


def _map_item(mapped: MappedInput, item: InputItem, where: str) -> None:
    """One parsed item into the conversation (``where`` names it in later errors)."""
    if isinstance(item, InputMessageItem):
        content = content_of(item.content, f"{where}.content")
        if item.role in ("system", "developer"):
            if isinstance(content, tuple):  # an image in guidance: the validator names it
                mapped.messages.append(Message(item.role, content, source=Source(where)))
            elif content:
                mapped.guidance.append(content)
        else:
            reasoning = _take_thought(mapped) if item.role == "assistant" else None
            mapped.messages.append(Message(item.role, content, reasoning=reasoning, source=Source(where)))
    elif isinstance(item, InputFunctionCallItem):
        namespace = item.namespace if isinstance(item.namespace, str) else None
        source = Source(where, {"id": "call_id"})
        _add_call(mapped, ToolCall(item.call_id, item.name, item.arguments, namespace, source), where)
    elif isinstance(item, InputCustomToolCallItem):
        namespace = item.namespace if isinstance(item.namespace, str) else None
        source = Source(where, {"id": "call_id", "arguments": "input"})
        _add_call(mapped, ToolCall(item.call_id, item.name, item.input, namespace, source, type="custom"), where)
    elif isinstance(item, InputFunctionCallOutputItem | InputCustomToolCallOutputItem):
        output = item.output if isinstance(item.output, str) else content_of(item.output, f"{where}.output")
        source = Source(where, {"tool_call_id": "call_id"})
        mapped.messages.append(Message("tool", output, tool_call_id=item.call_id, source=source))
    elif isinstance(item, InputReasoningItem):
        mapped.thought = _thought_text(item) or None  # the next assistant turn carries it to the template
    elif isinstance(item, InputToolSearchCallItem):
        call = search_call(item, where)
        mapped.searching.append(call.id)
        _add_call(mapped, call, where)
    elif isinstance(item, InputToolSearchOutputItem):
        answered = item.call_id if isinstance(item.call_id, str) and item.call_id else None
        call_id = answered or (mapped.searching[-1] if mapped.searching else item.id)
        if call_id in mapped.searching:
            mapped.searching.remove(call_id)
        found = output_tools(item, where)
        mapped.found += found
        mapped.messages.append(output_message(item, call_id, where, found))
    else:  # a compaction note
        body = decode_payload(item.encrypted_content, param=f"{where}.encrypted_content")
        if body.get("prunes") is True:  # server-side compaction's: it replaces the conversation before it
            mapped.notes, mapped.cut = [], True
            mapped.messages = [note_turn(str(body["summary"]), Source(where))]
        else:
            mapped.notes.append(str(body["summary"]))
    mapped.items.append(item)


def map_input(value: Any, *, resolve: Resolver, param: str = "input") -> MappedInput:
    """A Responses ``input`` (string or items) parsed and mapped; errors name ``input[i]…``."""
    mapped = MappedInput()
    if isinstance(value, str):
        _map_item(mapped, _parsed({"role": "user", "content": value}, "message", param), param)
        return mapped
    if not isinstance(value, list):
        raise InvalidRequest(f"{param} must be a string or a list of items", param=param)
    for i, item in enumerate(value):
        where = f"{param}[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest("an input item must be an object", param=where, code="invalid_json")
        _map_item(mapped, _parse_item(item, where, resolve), where)
    return mapped


def map_items(items: Sequence[InputItem], *, param: str) -> MappedInput:
    """Items parsed before (a stored conversation) mapped as they are; sources name ``param[i]``."""
    mapped = MappedInput()
    for i, item in enumerate(items):
        _map_item(mapped, item, f"{param}[{i}]")
    return mapped


def _refuse(wire: ResponsesRequest) -> None:
    def no(param: str, message: str) -> InvalidRequest:
        return InvalidRequest(message, param=param, code="unsupported_value")

    if wire.background:
        raise no("background", "background responses are not supported; every response here runs in the foreground")
    if wire.prompt is not None:
        raise no("prompt", "prompt templates are not supported; send instructions and input instead")
    if wire.conversation is not None:
        raise no("conversation", "hosted conversations are not supported; use previous_response_id or resend input")
    for j, value in enumerate(wire.include or ()):
        if value not in ALLOWED_INCLUDE:
            raise no(f"include[{j}]", f"include value '{value}' is not supported")
    reasoning, text = wire.reasoning, wire.text
    _one_of("reasoning.effort", reasoning.effort if reasoning else None, EFFORTS)
    _one_of("reasoning.summary", reasoning.summary if reasoning else None, SUMMARIES)
    _one_of("reasoning.generate_summary", reasoning.generate_summary if reasoning else None, SUMMARIES)
    _one_of("text.verbosity", text.verbosity if text else None, VERBOSITIES)
    _one_of("truncation", wire.truncation, TRUNCATIONS)
    fmt = text.format if text else None
    named = isinstance(fmt, dict) and (fmt.get("type") != "json_schema" or isinstance(fmt.get("name"), str))
    if isinstance(fmt, dict) and "schema" in fmt and not named:  # no schema at all: the validator names it
        raise InvalidRequest("a json_schema format needs a name", param="text.format.name")


def _one_of(param: str, value: str | None, allowed: tuple[str, ...]) -> None:
    """A value the Responses API defines only as an enum: one of it, or refused by name (the response
    echoes it, and what it echoes must be a value its schema allows)."""
    if value is not None and value not in allowed:
        raise InvalidRequest(
            f"{param} '{value}' is not defined by the Responses API; use one of {', '.join(allowed)}",
            param=param,
            code="unsupported_value",
        )


def to_chat_request(
    wire: ResponsesRequest,
    *,
    history: Sequence[InputItem],
    resolve: Resolver,
    workspace: str | None = None,
) -> tuple[ChatRequest, MappedInput]:
    """The neutral request, and the mapped input of THIS request (its items are what a store keeps)."""
    _refuse(wire)
    if not wire.model:
        raise InvalidRequest("model is required", param="model")
    if wire.input is None:
        raise InvalidRequest("input is required", param="input")
    conversation = map_items(history, param="previous_response_id")
    current = map_input(wire.input, resolve=resolve)
    conversation.extend(current)
    system = ([wire.instructions] if wire.instructions else []) + conversation.guidance
    notes = [summary_preamble(note) for note in conversation.notes]  # the server's own: never stripped
    messages = [Message("system", "\n\n".join(system))] if system else []
    messages += [Message("system", "\n\n".join(notes), server=True)] if notes else []
    messages += conversation.messages
    reasoning = wire.reasoning or None
    text = wire.text or None
    chat = ChatRequest(
        model=wire.model,
        messages=tuple(messages),
        tools=with_loaded(map_tools(wire.tools), conversation.found),
        tool_choice=openai_tool_choice(wire.tool_choice),
        sampling=sampling_of(wire),
        max_tokens=wire.max_output_tokens,
        cap_param="max_output_tokens",
        reasoning=ReasoningControls(effort=reasoning.effort if reasoning else None),
        output_format=format_request(text.format if text else None, param="text.format"),
        top_logprobs=wire.top_logprobs,
        stream=bool(wire.stream),
        workspace=workspace,
        messages_param="input",
    )
    return chat, current
