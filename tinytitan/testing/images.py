"""Small real pictures for the image tests (issue 41), made with Pillow, and the ways clients send them.

``picture`` encodes a solid-colour picture (bytes, as a client sends them); ``checked_picture`` is one
as the request side checks it (an ``Image``: a different colour is a different image, byte for byte);
``image_message`` is a user message of text and checked images as the engine receives it."""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import zlib

from tinytitan.engine.request import Image, Message, Part

__all__ = ["bomb_png", "checked_picture", "data_url", "image_message", "picture", "truncated"]

_FORMATS = {"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WEBP"}


def picture(kind: str = "png", width: int = 8, height: int = 6, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A ``width`` × ``height`` picture of one color, encoded as ``kind`` (png, jpeg, gif, webp)."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format=_FORMATS[kind])
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def truncated(data: bytes) -> bytes:
    """The picture cut short: its signature and header intact, its pixels missing."""
    return data[: max(40, len(data) // 2)]


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header claims ``width`` × ``height`` pixels (a decompression bomb's header;
    its data is a few bytes: a decoder that trusted the header would allocate gigabytes)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def checked_picture(color: tuple[int, int, int], size: tuple[int, int] = (100, 50)) -> Image:
    """A solid ``color`` PNG of ``size`` (width, height), as the request side checks one."""
    data = picture("png", size[0], size[1], color)
    return Image(data, "image/png", hashlib.sha256(data).hexdigest(), size[0], size[1])


def image_message(*parts: str | Image) -> Message:
    """A user message of text and checked image parts, in order."""
    return Message(
        "user", tuple(Part("image", image=p) if isinstance(p, Image) else Part("text", text=p) for p in parts)
    )
