"""Anthropic Messages wire request → ``ChatRequest`` (reference §12).

Only the Messages-specific refusals and reshaping live here (system blocks, block types, tool
results, prefill, thinking budgets, the billing line); everything shared — roles, tool-call
pairing, sampling ranges, the output cap, stop strings, tool names and schemas, tool_choice
forcing, structured output — is left to the one validator. Every message, block, tool and call
carries its ``Source`` (its path in the request and Anthropic's spelling of its fields), so the
validator's errors name ``messages[1].content[0].name`` or ``tools[2].input_schema``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from tinytitan.api.shapes import format_request, sampling_of
from tinytitan.engine.errors import InvalidRequest, text_only
from tinytitan.engine.events import Source, ToolCall
from tinytitan.engine.passes.server_side import note_turn
from tinytitan.engine.request import (
    ChatRequest,
    Message,
    Part,
    ReasoningControls,
    Tool,
    ToolChoice,
    new_request_id,
)

from .images import image_block, joined, merge_contents
from .protocol import ContentBlock, InputMessage, MessagesRequest, ThinkingConfig
from .protocol import ToolChoice as WireToolChoice
from .tool_search import reference_parts, segments, tool_of

__all__ = ["to_chat_request"]

_BILLING = re.compile(r"^\s*x-anthropic-billing-header:[^\n]*\n?")
_SKIPPED_BLOCKS = ("thinking", "redacted_thinking", "compaction")  # compaction: a null one (a no-op)


def _unsupported(kind: str, param: str) -> InvalidRequest:
    return text_only(f"{kind} blocks", param)


def _drop_billing(text: str) -> str:
    """Claude Code's per-conversation billing line carries no guidance and would break the prefix cache."""
    return _BILLING.sub("", text, count=1)


# -- request: system, messages ---------------------------------------------------------------------


def _system_texts(system: str | list[ContentBlock] | None, param: str = "system") -> list[str]:
    if system is None:
        return []
    blocks = [ContentBlock("text", text=system)] if isinstance(system, str) else system
    texts: list[str] = []
    for j, block in enumerate(blocks):
        where = param if isinstance(system, str) else f"{param}[{j}]"
        if block.type != "text":
            raise _unsupported(block.type, where)
        if block.text is None:
            raise InvalidRequest("a text block needs a 'text' string", param=f"{where}.text")
        text = _drop_billing(block.text)
        if text.strip():
            texts.append(text)
    return texts


def _tool_result_content(block: ContentBlock, where: str) -> str | tuple[Part, ...]:
    """A tool_result's text; with ``tool_reference`` blocks, its text and one reference part each."""
    content = block.content
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, ContentBlock):
        raise InvalidRequest("tool_result content must be a string or a list of blocks", param=f"{where}.content")
    else:
        parts: list[str | Part] = []
        for k, inner in enumerate(content):
            if inner.type == "tool_reference":
                continue
            if inner.type == "image":  # a screenshot Claude Code's Read tool returns
                parts.append(image_block(inner, f"{where}.content[{k}]"))
                continue
            if inner.type != "text":
                raise _unsupported(inner.type, f"{where}.content[{k}]")
            parts.append(inner.text or "")
        if any(isinstance(p, Part) for p in parts):
            return joined(parts, "\n", "Error: " if block.is_error else "")
        text = "\n".join(p for p in parts if isinstance(p, str))
    text = f"Error: {text}" if block.is_error else text
    references = reference_parts(content, where, text) if isinstance(content, list) else None
    return text if references is None else references


_HOME = {
    "tool_use": ("assistant", "invalid_tool_call"),
    "server_tool_use": ("assistant", "invalid_tool_call"),
    "tool_result": ("user", "invalid_tool_result"),
}
T = TypeVar("T")


def _sort_blocks(
    blocks: list[ContentBlock], where: str, keep: Mapping[str, Callable[[ContentBlock, str], T]], first: int = 0
) -> tuple[list[str | Part], list[T]]:
    """A turn's text, and its ``keep`` blocks read by their readers, in order; thinking blocks the turn
    does not keep are skipped, blocks of the other side (``tool_use`` from a user) and non-text ones
    refused. ``first``: the index of ``blocks[0]`` in its message."""
    texts: list[str | Part] = []
    kept: list[T] = []
    for j, block in enumerate(blocks, first):
        here = f"{where}.content[{j}]"
        if block.type == "text":
            texts.append(block.text or "")
        elif block.type == "image" and "tool_result" in keep:  # a user message's (an assistant has none)
            texts.append(image_block(block, here))
        elif block.type == "image":
            raise InvalidRequest("image blocks are only allowed in user messages", param=here, code="invalid_message")
        elif block.type in keep:
            kept.append(keep[block.type](block, here))
        elif block.type in _HOME:
            home, code = _HOME[block.type]
            raise InvalidRequest(f"{block.type} blocks are only allowed in {home} messages", param=here, code=code)
        elif block.type not in _SKIPPED_BLOCKS:
            raise _unsupported(block.type, here)
    return texts, kept


def _tool_result(block: ContentBlock, here: str) -> Message:
    if not block.tool_use_id:
        raise InvalidRequest(
            "a tool_result block needs a tool_use_id", param=f"{here}.tool_use_id", code="invalid_tool_result"
        )
    source = Source(here, {"tool_call_id": "tool_use_id"})
    return Message("tool", _tool_result_content(block, here), tool_call_id=block.tool_use_id, source=source)


def _tool_use(block: ContentBlock, here: str) -> ToolCall:
    """A ``tool_use`` block, or a ``server_tool_use`` one (a search the server ran: its result follows)."""
    args = {} if block.input is None else block.input
    if not isinstance(args, dict):
        raise InvalidRequest(
            "tool_use input must be a JSON object", param=f"{here}.input", code="invalid_tool_arguments"
        )
    arguments = json.dumps(args, ensure_ascii=False)
    return ToolCall(block.id or "", block.name or "", arguments, source=Source(here, {"arguments": "input"}))


def _thought(block: ContentBlock, _here: str) -> str:
    return block.thinking or ""


def _user_messages(blocks: list[ContentBlock], where: str) -> list[Message]:
    """Tool results become tool messages (first: they answer the previous turn), the text one user turn."""
    texts, messages = _sort_blocks(blocks, where, {"tool_result": _tool_result})
    if texts or not messages:
        messages.append(Message("user", joined(texts, "\n\n"), source=Source(where)))
    return messages


def _assistant_message(blocks: list[ContentBlock], where: str, first: int = 0) -> Message:
    readers: dict[str, Callable[[ContentBlock, str], ToolCall | str]] = {
        "tool_use": _tool_use,
        "server_tool_use": _tool_use,
        "thinking": _thought,
    }
    pieces, kept = _sort_blocks(blocks, where, readers, first)
    texts = [p for p in pieces if isinstance(p, str)]  # an assistant's image is refused in _sort_blocks
    calls = tuple(item for item in kept if isinstance(item, ToolCall))
    # thoughts sent back go to the template, which renders them where it keeps them (reference §5)
    reasoning = "".join(item for item in kept if isinstance(item, str)) or None
    return Message("assistant", "\n\n".join(texts), tool_calls=calls, reasoning=reasoning, source=Source(where))


def _append_merging_users(turns: list[Message], message: Message) -> None:
    """Consecutive user turns combine into one, as the API documents."""
    previous = turns[-1] if turns else None
    if message.role == "user" and previous is not None and previous.role == "user":
        merged = merge_contents(previous.content, message.content)
        turns[-1] = Message("user", merged, source=previous.source, server=previous.server)
    else:
        turns.append(message)


def _compaction_cut(wire: list[InputMessage]) -> tuple[int, int, str] | None:
    """Where the last compaction block with a summary sits (message, block) and its summary: it
    replaces everything before it. A block whose content is null (a failed compaction) is a no-op."""
    cut: tuple[int, int, str] | None = None
    for i, message in enumerate(wire):
        for j, block in enumerate(message.content if isinstance(message.content, list) else ()):
            if block.type != "compaction":
                continue
            where = f"messages[{i}].content[{j}]"
            if message.role != "assistant":
                raise InvalidRequest(
                    "compaction blocks are only allowed in assistant messages", param=where, code="invalid_message"
                )
            if block.content is None:
                continue
            if not isinstance(block.content, str) or not block.content.strip():
                raise InvalidRequest(
                    "a compaction block's content must be a non-empty string, or null", param=f"{where}.content"
                )
            cut = (i, j, block.content)
    return cut


def _messages(wire: list[InputMessage], system: list[str], *, session: bool = False) -> tuple[Message, ...]:
    cut = _compaction_cut(wire)
    conversation = [i for i, m in enumerate(wire) if m.role != "system"]
    last = conversation[-1] if conversation else None
    ends_at_the_cut = cut is not None and last == cut[0] and len(wire[last].content) == cut[1] + 1
    if last is not None and wire[last].role == "assistant" and not session and not ends_at_the_cut:
        raise InvalidRequest(
            "a trailing assistant message (prefill) is not supported",
            param=f"messages[{last}]",
            code="invalid_message",
        )
    guidance = list(system)
    turns: list[Message] = []
    for i, message in enumerate(wire):
        where = f"messages[{i}]"
        content = message.content
        blocks = [ContentBlock("text", text=content)] if isinstance(content, str) else content
        if message.role == "system":  # Claude Code's mid-conversation guidance joins the system block
            guidance.extend(_system_texts(message.content, f"{where}.content"))
        elif cut is not None and i < cut[0]:
            continue  # the compaction block stands for it
        elif message.role == "user":
            for mapped in _user_messages(blocks, where):
                _append_merging_users(turns, mapped)
        elif message.role == "assistant":
            if cut is not None and i == cut[0]:  # the note, as the user turn the rest continues from
                turns.append(note_turn(cut[2], Source(f"{where}.content[{cut[1]}]")))
                blocks = blocks[cut[1] + 1 :]
                if not blocks:
                    continue
            for first, end, result in segments(blocks, where):  # cut after each search result
                if end > first or result is None:
                    turns.append(_assistant_message(blocks[first:end], where, first))
                if result is not None:
                    turns.append(result)
        else:
            raise InvalidRequest(
                f"unknown role '{message.role}'; expected user or assistant",
                param=f"{where}.role",
                code="invalid_message",
            )
    return tuple(Message("system", text) for text in guidance) + tuple(turns)


# -- request: tools, choice, thinking, format -------------------------------------------------------


def _tools(wire: MessagesRequest) -> tuple[Tool, ...]:
    """Custom tools (deferred or not) and the tool search server tools (``tool_search``)."""
    return tuple(tool_of(t, i) for i, t in enumerate(wire.tools or ()))


def _tool_choice(choice: WireToolChoice | None) -> ToolChoice | None:
    if choice is None:
        return None
    if choice.disable_parallel_tool_use:
        raise InvalidRequest(
            "disable_parallel_tool_use is not supported: the decoder emits the calls the model produces",
            param="tool_choice.disable_parallel_tool_use",
            code="unsupported_value",
        )
    if choice.type in ("auto", "none"):
        return ToolChoice(choice.type)
    if choice.type == "any":
        return ToolChoice("required")
    if choice.type == "tool":
        if not choice.name:
            raise InvalidRequest("tool_choice of type 'tool' needs the tool's name", param="tool_choice.name")
        return ToolChoice("function", choice.name)
    raise InvalidRequest(
        f"unknown tool_choice type '{choice.type}'; use auto, none, any or tool", param="tool_choice.type"
    )


def _thinking(thinking: ThinkingConfig | None, max_tokens: int | None) -> ReasoningControls:
    """disabled → off; enabled → the budget's rung of the ladder; adaptive → the server's default."""
    if thinking is None or thinking.type == "adaptive":
        return ReasoningControls()
    if thinking.type == "disabled":
        return ReasoningControls(level="off")
    if thinking.type != "enabled":
        raise InvalidRequest(
            f"unknown thinking type '{thinking.type}'; use enabled, disabled or adaptive", param="thinking.type"
        )
    budget = thinking.budget_tokens
    param = "thinking.budget_tokens"
    if budget is None:
        raise InvalidRequest("Field required", param=param)
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise InvalidRequest("budget_tokens must be an integer", param=param)
    if budget < 1024:
        raise InvalidRequest(f"budget_tokens must be at least 1024, got {budget}", param=param)
    if max_tokens is not None and max_tokens > 0 and budget >= max_tokens:
        raise InvalidRequest(f"budget_tokens ({budget}) must be less than max_tokens ({max_tokens})", param=param)
    level = "low" if budget < 4096 else "medium" if budget < 16384 else "xhigh"
    return ReasoningControls(level=level)


def _refuse_by_name(wire: MessagesRequest) -> None:
    if wire.output_format is not None:
        raise InvalidRequest(
            "output_format is not supported; use output_config.format", param="output_format", code="unsupported_value"
        )
    for name in ("container", "mcp_servers"):
        if getattr(wire, name) is not None:
            raise InvalidRequest(f"{name} is not supported by this server", param=name, code="unsupported_value")


def to_chat_request(
    wire: MessagesRequest,
    *,
    context_window: int | None = None,
    count_only: bool = False,
    request_id: str | None = None,
    workspace: str | None = None,
    session: bool = False,
) -> ChatRequest:
    """Map a Messages request. ``count_only`` (count_tokens) does not require ``max_tokens``;
    ``session``: a saved conversation (``tinytitan compact``), whose last message may be the reply."""
    if not wire.model:
        raise InvalidRequest("Field required", param="model")
    if wire.messages is None:
        raise InvalidRequest("Field required", param="messages")
    if wire.max_tokens is None and not count_only:
        raise InvalidRequest("Field required", param="max_tokens")
    _refuse_by_name(wire)
    cap = wire.max_tokens
    if cap is not None and context_window is not None:
        cap = min(cap, context_window)  # the validator clamps the same way; the budget rule sees it now
    return ChatRequest(
        model=wire.model,
        messages=_messages(wire.messages, _system_texts(wire.system), session=session),
        tools=_tools(wire),
        tool_choice=_tool_choice(wire.tool_choice),
        sampling=sampling_of(wire),
        stop=tuple(wire.stop_sequences) if wire.stop_sequences is not None else None,
        max_tokens=wire.max_tokens,
        top_p_zero=True,
        temperature_max=1.0,
        reasoning=_thinking(wire.thinking, cap),
        output_format=format_request(
            wire.output_config.format if wire.output_config else None,
            param="output_config.format",
            default_name="output",
        ),
        stream=bool(wire.stream) and not count_only,
        workspace=workspace,
        request_id=request_id or new_request_id(),
        stop_param="stop_sequences",
    )
