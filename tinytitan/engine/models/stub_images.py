"""The scripted backend's images (issue 41): a script's ``"vision": true`` model takes them, a rule
may match on them (``when.images``: how many; ``when.image_digest``: a prefix of one's sha256) and a
reply may say what it was shown (``describe_images``), so a client can be wired without weights."""

from __future__ import annotations

from typing import Any

from tinytitan.engine.request import Image, ValidatedRequest

__all__ = ["describe_images", "recorded_image", "request_images"]


def request_images(request: ValidatedRequest) -> list[Image]:
    """Every image of the request's turns, in order."""
    return [p for turn in request.turns for p in turn.parts if isinstance(p, Image)]


def describe_images(request: ValidatedRequest) -> str:
    """A scripted ``describe_images`` reply: what the model was shown, one line a test can read."""
    images = request_images(request)
    seen = "; ".join(f"{i.media_type} {i.width}x{i.height} {i.digest[:12]}" for i in images)
    return f"{len(images)} image(s)" + (f": {seen}" if seen else "")


def recorded_image(image: Image) -> dict[str, Any]:
    """An image as ``/_stub/requests`` records it (never its bytes)."""
    return {
        "media_type": image.media_type,
        "width": image.width,
        "height": image.height,
        "digest": image.digest,
        "detail": image.detail,
        "bytes": len(image.data),
    }
