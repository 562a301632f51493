"""Messages ``image`` blocks (reference §12, issue 41): a ``base64`` source (``media_type`` and
``data``) or a ``url`` one, in a user message or inside a ``tool_result`` (Claude Code's Read tool
sends a screenshot that way). A ``file`` source is refused by name: this server keeps no files."""

from __future__ import annotations

from typing import Any

from tinytitan.api.images import image_part
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import Part

__all__ = ["image_block", "joined", "merge_contents"]


def _string(source: dict[str, Any], key: str, here: str) -> str:
    value = source.get(key)
    if not isinstance(value, str) or (not value and key != "data"):  # empty data: "the image is empty"
        raise InvalidRequest(f"an image source of type '{source.get('type')}' needs '{key}'", param=f"{here}.{key}")
    return value


def image_block(block: Any, here: str) -> Part:
    """An ``image`` block (at ``here``) as an image to check."""
    source = block.source
    where = f"{here}.source"
    if not isinstance(source, dict):
        raise InvalidRequest("an image block needs a source object", param=where)
    kind = source.get("type")
    if kind == "base64":
        media_type = _string(source, "media_type", where)
        data = _string(source, "data", where)
        return image_part(data, f"{where}.data", here, media_type=media_type, media_param=f"{where}.media_type")
    if kind == "url":
        return image_part(_string(source, "url", where), f"{where}.url", here)
    if kind == "file":
        raise InvalidRequest(
            "image sources of type 'file' are not supported: this server has no Files API; send base64 data",
            param=f"{where}.type",
            code="unsupported_value",
        )
    raise InvalidRequest(f"unknown image source type '{kind}'; use base64 or url", param=f"{where}.type")


def joined(pieces: list[str | Part], sep: str, prefix: str = "") -> str | tuple[Part, ...]:
    """Text blocks joined by ``sep`` (``prefix`` first); with images, the parts in the order sent
    (their text joined is the same text)."""
    if all(isinstance(p, str) for p in pieces):
        return prefix + sep.join(p for p in pieces if isinstance(p, str))
    out = [Part("text", prefix)] if prefix else []
    texts = 0
    for piece in pieces:
        if isinstance(piece, Part):
            out.append(piece)
        else:
            out.append(Part("text", (sep if texts else "") + piece))
            texts += 1
    return tuple(out)


def _parts(content: str | tuple[Part, ...] | None) -> tuple[Part, ...]:
    if isinstance(content, tuple):
        return content
    return (Part("text", content),) if content else ()


def merge_contents(
    first: str | tuple[Part, ...] | None, second: str | tuple[Part, ...] | None
) -> str | tuple[Part, ...]:
    """Two consecutive user turns' contents as one (a blank line between), as the API documents."""
    if (first is None or isinstance(first, str)) and (second is None or isinstance(second, str)):
        return "\n\n".join(t for t in (first, second) if t)
    a, b = _parts(first), _parts(second)
    return (*a, Part("text", "\n\n"), *b) if a and b else (*a, *b)
