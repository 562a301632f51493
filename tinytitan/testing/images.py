"""Pictures for tests of vision models: checked ``Image`` objects and requests that carry them.

``picture`` draws a solid-colour PNG (a different colour is a different image, byte for byte);
``image_message`` is a user message of text and images as the protocol mappers build it
(``Part("image", image=...)``). ``keeping_images`` is the validator's half of issue 41 as the
engine tests need it (a user turn's images kept in ``Turn.parts``) for as long as the request
side's own lands separately: it wraps ``validate`` where the engine calls it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tinytitan.engine.request import ChatRequest, Image, Message, Part, ValidatedRequest

__all__ = ["image_message", "keeping_images", "picture"]


def picture(color: tuple[int, int, int], size: tuple[int, int] = (100, 50)) -> Image:
    """A solid ``color`` PNG of ``size`` (width, height), as the request side checks one."""
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", size, color).save(buffer, "PNG")
    data = buffer.getvalue()
    return Image(data, "image/png", hashlib.sha256(data).hexdigest(), size[0], size[1])


def image_message(*parts: str | Image) -> Message:
    """A user message of text and image parts, in order."""
    return Message(
        "user", tuple(Part("image", image=p) if isinstance(p, Image) else Part("text", text=p) for p in parts)
    )


def _with_images(validate: Any) -> Any:
    def validating(request: ChatRequest, info: Any, **kwargs: Any) -> ValidatedRequest:
        kept: dict[int, tuple[str | Image, ...]] = {}
        messages: list[Message] = []
        for message in request.messages:
            content = message.content
            if isinstance(content, tuple) and any(p.image is not None for p in content):
                kept[len(messages)] = tuple(p.image if p.image is not None else p.text or "" for p in content)
                message = dataclasses.replace(message, content="".join(p.text or "" for p in content))
            messages.append(message)
        validated: ValidatedRequest = validate(dataclasses.replace(request, messages=tuple(messages)), info, **kwargs)
        if not kept:
            return validated
        turns = list(validated.turns)
        first = len(messages) - len(turns)  # the system messages come first and leave no turn
        for i, parts in kept.items():
            turns[i - first] = dataclasses.replace(turns[i - first], parts=parts)
        return dataclasses.replace(validated, turns=tuple(turns))

    return validating


@contextmanager
def keeping_images() -> Iterator[None]:
    """While open, the engine's validator keeps a user message's images in its turn's ``parts``."""
    from tinytitan.engine import service

    original = vars(service)["validate"]
    vars(service)["validate"] = _with_images(original)
    try:
        yield
    finally:
        vars(service)["validate"] = original
