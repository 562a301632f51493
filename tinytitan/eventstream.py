"""Reading a server-sent event stream the way a client does (WHATWG "event stream interpretation").

The one client-side reader: ``tinytitan chat`` reads its answers with it, and the test helpers
(``tinytitan.testing.sse``) read whole bodies with it. A frame ends at a blank line; ``data:`` lines
join with ``\\n``; one space after the colon is dropped; comment lines (``: ping``), ``id:`` and
``retry:`` carry no event, and a frame that never ended is not dispatched. ``read_frames`` yields
frames as their lines arrive (``response.iter_lines()``); ``frames`` reads a whole body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Frame", "frames", "read_frames"]

_EOL = re.compile(r"\r\n|\r|\n")  # the SSE line ends (not str.splitlines': U+2028 is text here)


@dataclass(frozen=True, slots=True)
class Frame:
    event: str | None  # the ``event:`` name, None when the frame has none
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def read_frames(lines: Iterable[str]) -> Iterator[Frame]:
    """Each frame as its blank line arrives, from the stream's lines (without their line ends)."""
    event: str | None = None
    data: list[str] | None = None
    for line in lines:
        if line == "":
            if data is not None:
                yield Frame(event, "\n".join(data))
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


def _lines(source: str | bytes | Iterable[str]) -> Iterable[str]:
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, str):
        lines = _EOL.split(source)
        return lines[:-1]  # what follows the last line end: "" for a whole body, else a line never ended
    return source


def frames(source: str | bytes | Iterable[str]) -> list[Frame]:
    """The dispatched frames of a whole body (``response.text``) or of its lines."""
    return list(read_frames(_lines(source)))
