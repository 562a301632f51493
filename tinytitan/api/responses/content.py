"""Responses content parts (reference §9): checked as sent, mapped to text or to parts with images.

A message's (or a tool output's) ``content`` is a string or a list of ``input_text``, ``output_text``,
``text``, ``refusal`` and ``input_image`` parts; an ``input_image`` is a data URL or base64 in
``image_url`` (a ``file_id`` is refused by name: this server keeps no files).
"""

from __future__ import annotations

from typing import Any

from tinytitan.api.images import DETAILS, image_part
from tinytitan.engine.errors import InvalidRequest, text_only
from tinytitan.engine.events import Source
from tinytitan.engine.request import Part

from .items import ContentPart, InputImagePart, RefusalPart

__all__ = ["check_content", "content_of", "text_of"]

_TEXT_PARTS = ("input_text", "output_text", "text")


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict):
        raise InvalidRequest("a content part must be an object", param=where, code="invalid_json")
    kind = part.get("type")
    if kind == "input_image":
        _check_image(part, where)
        return
    if kind in _TEXT_PARTS or kind == "refusal":
        if not isinstance(part.get("refusal" if kind == "refusal" else "text"), str):
            raise InvalidRequest(f"a {kind} part needs a string", param=where)
        return
    raise text_only(f"content parts of type '{kind}'", where)


def _check_image(part: dict[str, Any], where: str) -> None:
    """An ``input_image`` part: an ``image_url`` (a data URL or base64); a ``file_id`` is refused by
    name (this server keeps no files)."""
    if part.get("file_id") is not None:
        raise InvalidRequest(
            "input_image file_id is not supported: this server has no Files API; send the image as a data URL "
            "or base64 in image_url",
            param=f"{where}.file_id",
            code="unsupported_value",
        )
    if not isinstance(part.get("image_url"), str):
        raise InvalidRequest("an input_image part needs an image_url string", param=f"{where}.image_url")
    detail = part.get("detail")
    if detail is not None and detail not in DETAILS:
        raise InvalidRequest(f"detail '{detail}' is not one of {', '.join(DETAILS)}", param=f"{where}.detail")


def check_content(value: Any, where: str) -> None:
    """Text, or a list of parts (``input_text``, ``output_text``, ``text``, ``refusal``, ``input_image``)."""
    if isinstance(value, list):
        for j, part in enumerate(value):
            _check_part(part, f"{where}[{j}]")
    elif not isinstance(value, str):
        raise InvalidRequest("content must be a string or a list of text parts", param=where)


def text_of(parts: list[ContentPart]) -> str:
    return "".join(
        part.refusal if isinstance(part, RefusalPart) else part.text
        for part in parts
        if not isinstance(part, InputImagePart)
    )


def content_of(parts: list[ContentPart], where: str) -> str | tuple[Part, ...]:
    """A message's (or a tool output's) text; with images, its parts in order (the images to check)."""
    if not any(isinstance(p, InputImagePart) for p in parts):
        return text_of(parts)
    out: list[Part] = []
    for j, part in enumerate(parts):
        here = f"{where}[{j}]"
        if isinstance(part, InputImagePart):
            url = part.image_url if isinstance(part.image_url, str) else ""
            detail = part.detail if isinstance(part.detail, str) else None
            out.append(image_part(url, f"{here}.image_url", here, detail=detail))
        else:
            out.append(Part("text", text_of([part]), Source(here)))
    return tuple(out)
