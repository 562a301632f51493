"""Responses wire types (requests). Pure data: no engine imports.

Input items and tools stay plain JSON objects: their shape depends on ``type`` (which may even be
absent and inferred), so the mapper reads them field by field and names the offending path.
Unknown top-level fields (Codex's ``client_metadata``) are ignored.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["CompactRequest", "ReasoningParam", "ResponsesRequest", "TextParam"]


class ReasoningParam(msgspec.Struct, omit_defaults=True):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None


class TextParam(msgspec.Struct, omit_defaults=True):
    format: dict[str, Any] | None = None
    verbosity: str | None = None


class ResponsesRequest(msgspec.Struct, omit_defaults=True):
    model: str | None = None
    instructions: str | None = None
    input: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stream: bool | None = None
    store: bool | None = None
    background: bool | None = None
    reasoning: ReasoningParam | None = None
    previous_response_id: str | None = None
    metadata: dict[str, str] | None = None  # echoed and stored: string values only, as OpenAI's
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    truncation: str | None = None
    text: TextParam | None = None
    include: list[str] | None = None
    top_logprobs: int | None = None
    prompt: Any = None
    conversation: Any = None
    context_management: Any = None  # [{type: "compaction", compact_threshold}]: checked by ``compacting``


class CompactRequest(msgspec.Struct, omit_defaults=True):
    model: str | None = None
    instructions: str | None = None
    input: str | list[dict[str, Any]] | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    max_compaction_tokens: int | None = None
    # what the session's turns sent (as Codex's compact call does): the conversation is read as the
    # model read it, so the prompt cache serves it (reference §11)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning: ReasoningParam | None = None
    text: TextParam | None = None
