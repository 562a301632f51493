"""Responses input items (reference §9) as msgspec structs: a tagged union, parsed once. Pure data.

``mapping`` checks an incoming item field by field (naming the offending path), fills its ``type``
and ``id``, and converts it to one of these; the store keeps them, a continuation maps them without
reading JSON again, and ``GET /v1/responses/{id}/input_items`` answers them. An output item turns into
the input item of the same ``type`` (``store.as_input``). A field the client did not send stays
``UNSET`` (never encoded), so an item comes back as it was sent, ``type`` and ``id`` filled and a
string ``content`` made one text part; fields outside the Responses schema are not kept.
"""

from __future__ import annotations

from typing import Any, Literal

from tinytitan.api.wire import UNSET, Answer, Tagged, UnsetType

from .wire import InputText, SummaryText

__all__ = [
    "ContentPart",
    "InputCompactionItem",
    "InputCustomToolCallItem",
    "InputCustomToolCallOutputItem",
    "InputFunctionCallItem",
    "InputFunctionCallOutputItem",
    "InputImagePart",
    "InputItem",
    "InputItemList",
    "InputMessageItem",
    "InputReasoningItem",
    "InputToolSearchCallItem",
    "InputToolSearchOutputItem",
    "OutputTextPart",
    "ReasoningText",
    "RefusalPart",
    "TextPart",
]


# -- content parts ---------------------------------------------------------------------------------


class OutputTextPart(Tagged, tag="output_text"):
    """Assistant text sent back as input (``annotations`` / ``logprobs`` echoed when sent)."""

    text: str
    annotations: list[Any] | UnsetType = UNSET
    logprobs: list[Any] | UnsetType = UNSET


class TextPart(Tagged, tag="text"):
    text: str


class RefusalPart(Tagged, tag="refusal"):
    refusal: str


class InputImagePart(Tagged, tag="input_image"):
    """A picture: a data URL or base64 in ``image_url`` (``file_id`` is refused by the mapper)."""

    image_url: str | UnsetType | None = UNSET
    file_id: str | UnsetType | None = UNSET
    detail: str | UnsetType = UNSET


ContentPart = InputText | OutputTextPart | TextPart | RefusalPart | InputImagePart


class ReasoningText(Tagged, tag="reasoning_text"):
    text: str


# -- items -----------------------------------------------------------------------------------------


class InputMessageItem(Tagged, tag="message", kw_only=True):
    id: str
    role: Literal["user", "system", "developer", "assistant"]
    content: list[ContentPart]
    status: str | UnsetType | None = UNSET


class InputFunctionCallItem(Tagged, tag="function_call", kw_only=True):
    id: str
    call_id: str
    name: str
    arguments: str = ""
    namespace: str | UnsetType | None = UNSET
    status: str | UnsetType | None = UNSET


class InputFunctionCallOutputItem(Tagged, tag="function_call_output", kw_only=True):
    id: str
    call_id: str
    output: str | list[ContentPart]
    status: str | UnsetType | None = UNSET


class InputCustomToolCallItem(Tagged, tag="custom_tool_call", kw_only=True):
    """A custom (freeform) tool's call sent back: its ``input`` is the text the model wrote (issue 38)."""

    id: str
    call_id: str
    name: str
    input: str
    namespace: str | UnsetType | None = UNSET
    status: str | UnsetType | None = UNSET


class InputCustomToolCallOutputItem(Tagged, tag="custom_tool_call_output", kw_only=True):
    """What a custom tool's call gave back."""

    id: str
    call_id: str
    output: str | list[ContentPart]
    status: str | UnsetType | None = UNSET


class InputReasoningItem(Tagged, tag="reasoning", kw_only=True):
    """A replayed thought: its ``summary`` parts, else its ``reasoning_text`` ``content``."""

    id: str
    summary: list[SummaryText] | UnsetType = UNSET
    content: list[ReasoningText | TextPart] | UnsetType | None = UNSET
    encrypted_content: str | UnsetType | None = UNSET
    status: str | UnsetType | None = UNSET


class InputCompactionItem(Tagged, tag="compaction", kw_only=True):
    """A compaction note sent back (reference §11)."""

    id: str
    encrypted_content: str
    created_by: str | UnsetType = UNSET


class InputToolSearchCallItem(Tagged, tag="tool_search_call", kw_only=True):
    """A tool search the model called (issue 39): run by the server, or by the client (Codex)."""

    id: str
    call_id: str | UnsetType | None = UNSET
    execution: str | UnsetType = UNSET
    arguments: Any = UNSET
    status: str | UnsetType | None = UNSET


class InputToolSearchOutputItem(Tagged, tag="tool_search_output", kw_only=True):
    """What a tool search found: the definitions of the tools it loaded (functions, namespaces)."""

    id: str
    call_id: str | UnsetType | None = UNSET
    execution: str | UnsetType = UNSET
    tools: list[dict[str, Any]]
    status: str | UnsetType | None = UNSET


InputItem = (
    InputMessageItem
    | InputFunctionCallItem
    | InputFunctionCallOutputItem
    | InputReasoningItem
    | InputCompactionItem
    | InputToolSearchCallItem
    | InputToolSearchOutputItem
    | InputCustomToolCallItem
    | InputCustomToolCallOutputItem
)


class InputItemList(Answer, kw_only=True):
    """``GET /v1/responses/{id}/input_items``: one page of a stored response's input items."""

    object: Literal["list"] = "list"
    data: list[InputItem]
    first_id: str | None
    last_id: str | None
    has_more: bool
