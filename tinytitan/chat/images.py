"""Pictures the chat attaches (``/image PATH``, ``--image PATH``): each file becomes a Responses
``input_image`` part (a data URL) that goes with the next message. The server checks the bytes;
here only what a person would get wrong is caught early: a missing file, or one that is no picture."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tinytitan.chat.client import ChatError

__all__ = ["image_part", "text_only"]

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _media_type(data: bytes) -> str | None:
    for signature, media in _SIGNATURES:
        if data.startswith(signature):
            return media
    return "image/webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else None


def image_part(arg: str) -> tuple[dict[str, Any], str]:
    """The ``input_image`` part for the file ``arg`` names, and a line saying what was attached."""
    if not arg.strip():
        raise ChatError("/image needs a file name (a PNG, JPEG, GIF or WebP picture)")
    path = Path(arg.strip()).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ChatError(f"cannot read {path}: {exc.strerror or exc}") from None
    media = _media_type(data)
    if media is None:
        raise ChatError(f"{path} is not a PNG, JPEG, GIF or WebP picture")
    url = f"data:{media};base64,{base64.b64encode(data).decode()}"
    kib = max(1, round(len(data) / 1024))
    return {"type": "input_image", "image_url": url}, f"attached {path} ({media}, {kib:,} KiB)"


def text_only(model: str) -> str:
    """The line that refuses a picture for ``model``, a model without vision input."""
    return f"'{model}' is a text-only model and cannot see pictures; chat with a vision model to attach one"
