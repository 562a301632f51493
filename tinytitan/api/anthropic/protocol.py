"""Anthropic Messages wire types (requests). Pure data: no engine imports.

Unknown fields are ignored (Claude Code sends many: ``cache_control``, ``strict``,
``eager_input_streaming``, ``context_management`` edits, ...); a field of the wrong JSON type is a
decode error (400 ``invalid_json``). Fields whose checks need a precise message (``budget_tokens``,
a tool's ``input``) are typed loosely and checked by the translator.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ContentBlock",
    "InputMessage",
    "MessagesRequest",
    "OutputConfig",
    "ThinkingConfig",
    "ToolChoice",
    "ToolDefinition",
]


class ContentBlock(msgspec.Struct, omit_defaults=True):
    """Any content block; which fields matter depends on ``type``."""

    type: str
    text: str | None = None  # text
    id: str | None = None  # tool_use, server_tool_use
    name: str | None = None  # tool_use, server_tool_use
    input: Any = None  # tool_use, server_tool_use: a JSON object
    tool_use_id: str | None = None  # tool_result, tool_search_tool_result
    # tool_result: text or blocks; tool_search_tool_result: one tool_search_tool_search_result or error block
    content: str | list[ContentBlock] | ContentBlock | None = None
    is_error: bool | None = None  # tool_result
    thinking: str | None = None  # thinking
    signature: str | None = None  # thinking
    data: str | None = None  # redacted_thinking
    tool_name: str | None = None  # tool_reference
    tool_references: list[ContentBlock] | None = None  # tool_search_tool_search_result
    error_code: str | None = None  # tool_search_tool_result_error
    error_message: str | None = None  # tool_search_tool_result_error
    source: Any = None  # image: {"type": "base64", "media_type", "data"} or {"type": "url", "url"}


class InputMessage(msgspec.Struct, omit_defaults=True):
    role: str
    content: str | list[ContentBlock]


class ToolDefinition(msgspec.Struct, omit_defaults=True):
    name: str = ""
    description: str | None = None
    input_schema: Any = None
    type: str | None = None  # absent, "custom" or a tool search (tool_search_tool_regex_20251119, ...)
    defer_loading: bool | None = None  # left out of the prompt until a search or tool_reference reveals it


class ToolChoice(msgspec.Struct, omit_defaults=True):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingConfig(msgspec.Struct, omit_defaults=True):
    type: str
    budget_tokens: Any = None


class OutputConfig(msgspec.Struct, omit_defaults=True):
    effort: str | None = None
    format: Any = None


class MessagesRequest(msgspec.Struct, omit_defaults=True):
    """``POST /v1/messages`` and (without ``max_tokens``) ``POST /v1/messages/count_tokens``."""

    model: str | None = None
    messages: list[InputMessage] | None = None
    max_tokens: int | None = None
    system: str | list[ContentBlock] | None = None
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None
    service_tier: str | None = None
    output_config: OutputConfig | None = None
    context_management: Any = None  # accepted, not acted on: templates drop old thoughts themselves (§5)
    # refused by name (reference §4)
    output_format: Any = None
    container: Any = None
    mcp_servers: Any = None
