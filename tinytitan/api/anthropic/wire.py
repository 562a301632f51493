"""Anthropic Messages answers (reference §12) as msgspec structs: the message object and the events.

Blocks, deltas and events name their kind in ``type`` (written first). A failing stream's
``event: error`` is ``tinytitan.api.wire.AnthropicError``. Pure data.
"""

from __future__ import annotations

from typing import Any, Literal

from tinytitan.api.wire import Answer, AnthropicError, Tagged

__all__ = [
    "STREAM_EVENTS",
    "BlockDelta",
    "ContentBlock",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "InputJsonDelta",
    "Message",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "MessagesUsage",
    "Ping",
    "SignatureDelta",
    "StopDelta",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "TokenCount",
    "ToolUseBlock",
]


class ToolUseBlock(Tagged, tag="tool_use"):
    id: str
    name: str
    input: Any


class TextBlock(Tagged, tag="text"):
    text: str = ""


class ThinkingBlock(Tagged, tag="thinking"):
    thinking: str = ""
    signature: str = ""


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


class MessagesUsage(Answer):
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0


class Message(Tagged, tag="message", kw_only=True):
    id: str
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: MessagesUsage


class TokenCount(Answer):
    """``POST /v1/messages/count_tokens``'s answer."""

    input_tokens: int


# -- the event stream ----------------------------------------------------------------------------


class TextDelta(Tagged, tag="text_delta"):
    text: str


class ThinkingDelta(Tagged, tag="thinking_delta"):
    thinking: str


class SignatureDelta(Tagged, tag="signature_delta"):
    signature: str


class InputJsonDelta(Tagged, tag="input_json_delta"):
    partial_json: str


BlockDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta


class MessageStart(Tagged, tag="message_start"):
    message: Message


class ContentBlockStart(Tagged, tag="content_block_start"):
    index: int
    content_block: ContentBlock


class ContentBlockDelta(Tagged, tag="content_block_delta"):
    index: int
    delta: BlockDelta


class ContentBlockStop(Tagged, tag="content_block_stop"):
    index: int


class StopDelta(Answer):
    stop_reason: str
    stop_sequence: str | None


class MessageDelta(Tagged, tag="message_delta"):
    delta: StopDelta
    usage: MessagesUsage


class MessageStop(Tagged, tag="message_stop"):
    pass


class Ping(Tagged, tag="ping"):
    pass


STREAM_EVENTS: tuple[type, ...] = (
    MessageStart,
    ContentBlockStart,
    ContentBlockDelta,
    ContentBlockStop,
    MessageDelta,
    MessageStop,
    Ping,
    AnthropicError,
)
"""Every event a stream sends (``event:`` is its ``type``)."""
