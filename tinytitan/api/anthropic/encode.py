"""Anthropic Messages ↔ engine (reference §12): engine events → the message object / the SSE stream.

The wire → ``ChatRequest`` half lives in ``mapping`` and is re-exported here. Both encoders are
pure functions over engine events, so they are tested over hand-made event iterators.
"""

from __future__ import annotations

import json
from typing import Any

from tinytitan.api.errors import anthropic_error
from tinytitan.api.sse import SSE
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.request import new_id

__all__ = [
    "MessagesStream",
    "message_object",
    "stop_reason",
    "tool_use_id",
    "usage_object",
]


# -- the object ---------------------------------------------------------------------------


def tool_use_id(call: ToolCall) -> str:
    """Anthropic-style ids (``toolu_…``) for the engine's calls; the same call always gets the same id."""
    return "toolu_" + call.id.removeprefix("call_")


def usage_object(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.completion_tokens,
    }


def stop_reason(finished: Finished, has_calls: bool) -> tuple[str, str | None]:
    """``(stop_reason, stop_sequence)``: tool_use > max_tokens > stop_sequence > end_turn."""
    if has_calls:
        return "tool_use", None
    if finished.reason == "length":
        return "max_tokens", None
    if finished.stop_sequence is not None:
        return "stop_sequence", finished.stop_sequence
    return "end_turn", None


def _tool_input(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return {}


def _tool_use_block(call: ToolCall, *, with_input: bool = True) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_use_id(call),
        "name": call.name,
        "input": _tool_input(call) if with_input else {},
    }


def message_object(result: Completion, model: str, *, message_id: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if result.reasoning:
        content.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if result.text or not result.tool_calls:
        content.append({"type": "text", "text": result.text})
    content.extend(_tool_use_block(c) for c in result.tool_calls)
    reason, sequence = stop_reason(result.finished, bool(result.tool_calls))
    return {
        "id": message_id or new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage_object(result.finished.usage),
    }


# -- responses: the event stream ---------------------------------------------------------------------


class _Blocks:
    """Opens and closes content blocks in order; ``index`` counts them from 0."""

    def __init__(self) -> None:
        self.index = -1
        self.open: str | None = None
        self.kinds: list[str] = []

    def start(self, block: dict[str, Any]) -> list[SSE]:
        out = self.stop()
        self.index += 1
        self.open = block["type"]
        self.kinds.append(block["type"])
        out.append(
            SSE(
                {"type": "content_block_start", "index": self.index, "content_block": block},
                event="content_block_start",
            )
        )
        return out

    def delta(self, delta: dict[str, Any]) -> SSE:
        body = {"type": "content_block_delta", "index": self.index, "delta": delta}
        return SSE(body, event="content_block_delta")

    def stop(self) -> list[SSE]:
        if self.open is None:
            return []
        out = [self.delta({"type": "signature_delta", "signature": ""})] if self.open == "thinking" else []
        out.append(SSE({"type": "content_block_stop", "index": self.index}, event="content_block_stop"))
        self.open = None
        return out


def _event_items(event: Event, blocks: _Blocks) -> list[SSE]:
    if isinstance(event, ReasoningDelta) and event.text:
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        out = [] if blocks.open == "thinking" else blocks.start(opening)
        return [*out, blocks.delta({"type": "thinking_delta", "thinking": event.text})]
    if isinstance(event, TextDelta) and event.text:
        out = [] if blocks.open == "text" else blocks.start({"type": "text", "text": ""})
        return [*out, blocks.delta({"type": "text_delta", "text": event.text})]
    if isinstance(event, ToolCall):
        out = blocks.start(_tool_use_block(event, with_input=False))
        out.append(blocks.delta({"type": "input_json_delta", "partial_json": event.arguments or "{}"}))
        return [*out, *blocks.stop()]
    return []


class MessagesStream:
    """message_start → content blocks → message_delta → message_stop; a failure → ``event: error``."""

    def __init__(self, model: str, *, request_id: str, message_id: str | None = None) -> None:
        self.model = model
        self.request_id = request_id
        self.message_id = message_id or new_id("msg_")
        self.blocks = _Blocks()

    def start(self) -> list[SSE]:
        start: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_object(Usage()),
        }
        return [SSE({"type": "message_start", "message": start}, event="message_start")]

    def feed(self, event: Event) -> list[SSE]:
        blocks = self.blocks
        out = _event_items(event, blocks)
        if not isinstance(event, Finished):
            return out
        has_calls = "tool_use" in blocks.kinds
        out += blocks.stop()
        if not has_calls and "text" not in blocks.kinds:  # the object always has a text block then
            out += blocks.start({"type": "text", "text": ""}) + blocks.stop()
        reason, sequence = stop_reason(event, has_calls)
        delta = {"stop_reason": reason, "stop_sequence": sequence}
        out.append(
            SSE({"type": "message_delta", "delta": delta, "usage": usage_object(event.usage)}, event="message_delta")
        )
        out.append(SSE({"type": "message_stop"}, event="message_stop"))
        return out

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return [SSE(anthropic_error(exc, self.request_id)[1], event="error")]

    def end(self) -> list[SSE]:
        return []

    def keepalive(self) -> SSE:
        return SSE({"type": "ping"}, event="ping")

    def object(self, result: Completion) -> dict[str, Any]:
        return message_object(result, self.model, message_id=self.message_id)
