"""Memory records and the checks on what the model may write (reference §14).

A record is one value under a path-like key, with an importance (1–5), tags, the session that
wrote it and when it was created and last updated. Everything the model supplies — keys, prefixes,
tags, values, importance — passes through the checks here; a bad value raises ``MemoryToolError``,
which the tool layer turns into an error result the model sees (never a failed request).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_IMPORTANCE",
    "MAX_KEY_CHARS",
    "MAX_TAGS",
    "MAX_VALUE_BYTES",
    "MemoryToolError",
    "Record",
    "check_importance",
    "check_key",
    "check_prefix",
    "check_tags",
    "check_value",
    "summary_line",
]

MAX_VALUE_BYTES = 64 * 1024
MAX_KEY_CHARS = 200
MAX_KEY_SEGMENTS = 16
MAX_TAGS = 16
MAX_TAG_CHARS = 64
DEFAULT_IMPORTANCE = 3
SUMMARY_CHARS = 120

# one key segment: letters (any script), digits, and . _ - : @ + — no separators, globs or spaces
_SEGMENT = re.compile(r"^[\w.\-:@+]+$")
_TAG = re.compile(r"^[\w.\-:]+$")


class MemoryToolError(ValueError):
    """Something the model asked of memory that cannot be done; the message is shown to the model."""


@dataclass(slots=True)
class Record:
    key: str
    value: str
    importance: int = DEFAULT_IMPORTANCE
    tags: tuple[str, ...] = ()
    session: str | None = None
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(
            key=str(data["key"]),
            value=str(data["value"]),
            importance=int(data.get("importance", DEFAULT_IMPORTANCE)),
            tags=tuple(str(t) for t in data.get("tags", ())),
            session=data.get("session"),
            created=float(data["created"]),
            updated=float(data["updated"]),
        )

    @property
    def size(self) -> int:
        """Bytes the record costs against the retention limit (value and key, UTF-8)."""
        return len(self.value.encode()) + len(self.key.encode())


def _check_segments(text: str, what: str, *, allow_trailing_slash: bool) -> None:
    body = text[:-1] if allow_trailing_slash and text.endswith("/") else text
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise MemoryToolError(f"{what} must not contain control characters")
    if any(c in "*?[]{}" for c in text):
        raise MemoryToolError(f"{what} must not contain glob characters (* ? [ ] {{ }}); keys are literal")
    if "\\" in text:
        raise MemoryToolError(f"{what} must use '/' between segments, not '\\'")
    if text.startswith("/") or text.startswith("~"):
        raise MemoryToolError(f"{what} is relative to this workspace's memory: drop the leading '{text[0]}'")
    segments = body.split("/")
    if len(segments) > MAX_KEY_SEGMENTS:
        raise MemoryToolError(f"{what} has more than {MAX_KEY_SEGMENTS} segments")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise MemoryToolError(f"{what} '{text}' has an empty, '.' or '..' segment")
        if not _SEGMENT.match(segment):
            raise MemoryToolError(
                f"{what} '{text}' has a bad segment '{segment}': use letters, digits and . _ - : @ + "
                "between '/' separators (no spaces)"
            )


def check_key(key: Any) -> str:
    """A path-like key such as ``project/build-command``: the model names records only by these."""
    if not isinstance(key, str) or not key:
        raise MemoryToolError("key must be a non-empty string such as 'project/build-command'")
    if len(key) > MAX_KEY_CHARS:
        raise MemoryToolError(f"key is longer than {MAX_KEY_CHARS} characters")
    _check_segments(key, "key", allow_trailing_slash=False)
    return key


def check_prefix(prefix: Any) -> str:
    """A key prefix for list/search: empty, a partial segment (``proj``) or a folder (``project/``)."""
    if prefix is None or prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise MemoryToolError("prefix must be a string")
    if len(prefix) > MAX_KEY_CHARS:
        raise MemoryToolError(f"prefix is longer than {MAX_KEY_CHARS} characters")
    _check_segments(prefix, "prefix", allow_trailing_slash=True)
    return prefix


def check_value(value: Any, *, what: str = "value") -> str:
    if not isinstance(value, str):
        raise MemoryToolError(f"{what} must be a string")
    if not value.strip():
        raise MemoryToolError(f"{what} must not be empty (use memory_delete to forget a key)")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        raise MemoryToolError(f"{what} is not valid UTF-8 text") from None
    if size > MAX_VALUE_BYTES:
        raise MemoryToolError(f"{what} is {size} bytes; a memory holds at most {MAX_VALUE_BYTES} bytes (UTF-8)")
    if "\x00" in value:
        raise MemoryToolError(f"{what} must not contain NUL characters")
    return value


def check_importance(importance: Any, *, default: int = DEFAULT_IMPORTANCE) -> int:
    if importance is None:
        return default
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or importance != int(importance):
        raise MemoryToolError("importance must be a whole number from 1 (trivia) to 5 (essential)")
    if not 1 <= int(importance) <= 5:
        raise MemoryToolError(f"importance must be from 1 to 5, got {int(importance)}")
    return int(importance)


def check_tags(tags: Any) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise MemoryToolError("tags must be a list of strings")
    if len(tags) > MAX_TAGS:
        raise MemoryToolError(f"at most {MAX_TAGS} tags")
    for tag in tags:
        if not tag or len(tag) > MAX_TAG_CHARS or not _TAG.match(tag):
            raise MemoryToolError(
                f"bad tag '{tag[:MAX_TAG_CHARS]}': 1-{MAX_TAG_CHARS} letters, digits, '.', '_', '-' or ':'"
            )
    return tuple(dict.fromkeys(tags))


def summary_line(value: str, limit: int = SUMMARY_CHARS) -> str:
    """The first non-empty line of a value, shortened: what the bootstrap shows for a key."""
    first = next((line.strip() for line in value.splitlines() if line.strip()), "")
    more = len(first) > limit or first != value.strip()
    text = first[:limit].rstrip()
    return text + (" …" if more else "")
