"""Answer objects and stream events as msgspec structs, shared by the three protocols.

Each protocol package has a ``wire`` module of its answers and events (``protocol`` holds its
requests); this one has what they share: the one JSON encoder every frame goes through, the error
envelopes (reference §2), the model listings (reference §3) and the bases. A field the wire leaves
out when it has no value is ``UNSET`` (never encoded); a field the wire sends as ``null`` is
``None``. Events and items name their kind in ``type`` (``tag_field``), written first. Required fields
come before defaulted ones (msgspec's rule), so a struct's field order may differ from the old dicts'.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "UNSET",
    "Answer",
    "AnthropicError",
    "AnthropicErrorBody",
    "AnthropicModel",
    "AnthropicModelList",
    "OpenAIError",
    "OpenAIErrorBody",
    "OpenAIModel",
    "OpenAIModelList",
    "Tagged",
    "UnsetType",
    "encode",
    "encode_text",
    "kind",
]

_ENCODER = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """``value`` (a struct, or plain JSON values) as compact JSON — the one encoder of every frame."""
    return _ENCODER.encode(value)


def encode_text(value: Any) -> str:
    return _ENCODER.encode(value).decode()


class Answer(msgspec.Struct):
    """An answer object (or a part of one): every field is sent, ``UNSET`` ones excepted."""


class Tagged(msgspec.Struct, tag_field="type"):
    """An event, item or block whose ``type`` says which (``tag=`` on each subclass)."""


def kind(value: Tagged) -> str:
    """A tagged struct's ``type`` (an SSE frame's ``event:`` name)."""
    return str(type(value).__struct_config__.tag)


# -- error envelopes (reference §2) -----------------------------------------------------------------


class OpenAIErrorBody(Answer):
    message: str
    type: str
    code: str | None
    param: str | UnsetType = UNSET


class OpenAIError(Answer):
    """``{"error": {message, type, param?, code}}``: a refusal's body, and Chat's mid-stream error frame."""

    error: OpenAIErrorBody


class AnthropicErrorBody(Answer):
    type: str
    message: str


class AnthropicError(Tagged, tag="error"):
    """``{"type": "error", "error": {type, message}, "request_id"}``: a refusal, and ``event: error``."""

    error: AnthropicErrorBody
    request_id: str


# -- model listings (reference §3) -----------------------------------------------------------------


class OpenAIModel(Answer):
    """The OpenAI object plus the context facts (Codex's model metadata calls the window ``context_window``)."""

    id: str
    context_window: int
    max_output_tokens: int
    input_modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])  # "image" too: a vision model
    object: Literal["model"] = "model"
    owned_by: str = "tinytitan"
    tinytitan: dict[str, Any] | UnsetType = UNSET  # ``?details=true``


class OpenAIModelList(Answer):
    """OpenAI's list (``data``), and the same models as Codex's ``ModelInfo`` (``models``)."""

    data: list[OpenAIModel]
    object: Literal["list"] = "list"
    models: list[dict[str, Any]] | UnsetType = UNSET


class AnthropicModel(Tagged, tag="model"):
    """The Anthropic object with ``max_input_tokens`` / ``max_tokens``, the fields Claude Code reads."""

    id: str
    display_name: str
    max_input_tokens: int
    max_tokens: int
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: str = "1970-01-01T00:00:00Z"
    lifecycle: str = "active"
    tinytitan: dict[str, Any] | UnsetType = UNSET


class AnthropicModelList(Answer):
    data: list[AnthropicModel]
    first_id: str | None
    last_id: str | None
    has_more: bool = False
