"""Reading a server-sent event stream in a test: the client's reader (``tinytitan.eventstream``), plus
the test-side shapes of what it reads. ``frames`` keeps every frame; ``data`` is the data of each
(Chat Completions' ``[DONE]`` included); ``events`` reads named events with JSON data (Responses,
Messages), the shape both of those protocols promise for every frame.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinytitan.eventstream import Frame, frames

__all__ = ["Frame", "data", "events", "frames"]


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
