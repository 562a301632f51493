"""Anthropic Messages answers (reference §12) as msgspec structs: the message object and the events.

Blocks, deltas and events name their kind in ``type`` (written first). A failing stream's
``event: error`` is ``tinytitan.api.wire.AnthropicError``. Pure data.
"""

from __future__ import annotations

from typing import Any, Literal

from tinytitan.api.wire import UNSET, Answer, AnthropicError, Tagged, UnsetType

__all__ = [
    "STREAM_EVENTS",
    "AppliedEdit",
    "BlockDelta",
    "CompactionBlock",
    "CompactionDelta",
    "CompactionIteration",
    "ContentBlock",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "ContextManagement",
    "InputJsonDelta",
    "IterationUsage",
    "Message",
    "MessageDelta",
    "MessageIteration",
    "MessageStart",
    "MessageStop",
    "MessagesUsage",
    "Ping",
    "ServerToolUseBlock",
    "SignatureDelta",
    "StopDelta",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "TokenCount",
    "TokenCountContext",
    "ToolReference",
    "ToolSearchError",
    "ToolSearchResult",
    "ToolSearchToolResultBlock",
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


class CompactionBlock(Tagged, tag="compaction"):
    """A server-side compaction's note (``compact_20260112``): sent back, it replaces what came before it.
    ``None`` at ``content_block_start``; the one ``compaction_delta`` carries it whole."""

    content: str | None = None


class ServerToolUseBlock(Tagged, tag="server_tool_use"):
    """A tool search the server ran (``srvtoolu_…``); ``input`` is ``{}`` at ``content_block_start``,
    its JSON follows in one ``input_json_delta``."""

    id: str
    name: str
    input: Any


class ToolReference(Tagged, tag="tool_reference"):
    tool_name: str


class ToolSearchResult(Tagged, tag="tool_search_tool_search_result"):
    tool_references: list[ToolReference]


class ToolSearchError(Tagged, tag="tool_search_tool_result_error"):
    error_code: str
    error_message: str | None = None


class ToolSearchToolResultBlock(Tagged, tag="tool_search_tool_result"):
    """A search's result, whole (at ``content_block_start``): the tools it found, or why it failed."""

    tool_use_id: str
    content: ToolSearchResult | ToolSearchError


ContentBlock = (
    TextBlock | ThinkingBlock | ToolUseBlock | CompactionBlock | ServerToolUseBlock | ToolSearchToolResultBlock
)


class IterationUsage(Tagged):
    """One sampling iteration's usage: ``compaction`` (its passes) or ``message`` (the answer)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class CompactionIteration(IterationUsage, tag="compaction"):
    pass


class MessageIteration(IterationUsage, tag="message"):
    pass


class MessagesUsage(Answer):
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    iterations: list[CompactionIteration | MessageIteration] | UnsetType = UNSET  # a compaction's answer


class AppliedEdit(Tagged, tag="clear_thinking_20251015"):
    """A ``clear_thinking_20251015`` edit that cleared thoughts."""

    cleared_input_tokens: int
    cleared_thinking_turns: int


class ContextManagement(Answer):
    """What the request's ``context_management`` edits did (sent when the request had any)."""

    applied_edits: list[AppliedEdit]


class TokenCountContext(Answer):
    original_input_tokens: int


class Message(Tagged, tag="message", kw_only=True):
    id: str
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: MessagesUsage
    context_management: ContextManagement | UnsetType = UNSET


class TokenCount(Answer):
    """``POST /v1/messages/count_tokens``'s answer."""

    input_tokens: int
    context_management: TokenCountContext | UnsetType = UNSET


# -- the event stream ----------------------------------------------------------------------------


class TextDelta(Tagged, tag="text_delta"):
    text: str


class ThinkingDelta(Tagged, tag="thinking_delta"):
    thinking: str


class SignatureDelta(Tagged, tag="signature_delta"):
    signature: str


class InputJsonDelta(Tagged, tag="input_json_delta"):
    partial_json: str


class CompactionDelta(Tagged, tag="compaction_delta"):
    """The whole note of a compaction block, in one delta."""

    content: str


BlockDelta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta | CompactionDelta


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
    context_management: ContextManagement | UnsetType = UNSET


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
