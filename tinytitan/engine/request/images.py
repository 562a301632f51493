"""An image a client sent, as every layer after the protocol mappers sees it (issue 41).

The mappers read their protocol's spelling (Chat ``image_url`` parts, Responses ``input_image``,
Messages ``image`` blocks) and the request side checks the bytes (``Image`` is only built from an
image that decoded); the validator keeps images in a turn's ``parts`` for a model with vision input
and refuses them by name for a text-only one; the vision backend turns them into embeddings on the
device worker, and the prompt cache keys them by ``digest``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Image"]


@dataclass(frozen=True, slots=True)
class Image:
    """One checked image: its encoded bytes as sent, what they are, and the key the cache uses."""

    data: bytes  # the encoded image (PNG, JPEG, GIF or WebP) exactly as the client sent it
    media_type: str  # "image/png", "image/jpeg", "image/gif", "image/webp"
    digest: str  # sha256 hex of ``data``: the same picture twice is the same key, a different one never
    width: int
    height: int
    detail: str | None = None  # Chat / Responses ``detail`` ("auto", "low", "high") as sent

    def __repr__(self) -> str:  # never print megabytes of bytes in a log line or a test failure
        return f"Image({self.media_type}, {self.width}x{self.height}, {self.digest[:12]})"
