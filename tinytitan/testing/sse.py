"""Reading a server-sent event stream the way a client does (WHATWG "event stream interpretation").

A frame ends at a blank line; ``data:`` lines join with ``\n``; comment lines (``: ping``) and a
frame that never ended are not events. ``frames`` keeps every frame; ``data`` is the data of each
(Chat Completions' ``[DONE]`` included); ``events`` reads named events with JSON data (Responses,
Messages), the shape both of those protocols promise for every frame.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Frame", "data", "events", "frames"]

_EOL = re.compile(r"\r\n|\r|\n")  # the SSE line ends (not str.splitlines': U+2028 is text here)


@dataclass(frozen=True, slots=True)
class Frame:
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def _lines(source: str | bytes | Iterable[str]) -> Iterable[str]:
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, str):
        lines = _EOL.split(source)
        return lines[:-1]  # what follows the last line end: "" for a whole body, else a line never ended
    return source


def frames(source: str | bytes | Iterable[str]) -> list[Frame]:
    """The dispatched frames of a whole body (``response.text``) or its lines (``iter_lines()``)."""
    out: list[Frame] = []
    event: str | None = None
    data: list[str] | None = None
    for line in _lines(source):
        if line == "":
            if data is not None:
                out.append(Frame(event, "\n".join(data)))
            event, data = None, None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data = [*(data or []), value]
    return out


def data(source: str | bytes | Iterable[str]) -> list[str]:
    """Each frame's data, in order (``"[DONE]"`` as it came)."""
    return [frame.data for frame in frames(source)]


def events(source: str | bytes | Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` per frame of a stream whose every frame names its event and carries a JSON object."""
    out: list[tuple[str, dict[str, Any]]] = []
    for frame in frames(source):
        assert frame.event is not None, f"a frame without an event name: {frame.data!r}"
        value = frame.json()
        assert isinstance(value, dict), f"a frame whose data is not a JSON object: {frame.data!r}"
        out.append((frame.event, value))
    return out
