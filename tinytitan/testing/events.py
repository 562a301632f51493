"""Hand-made engine event streams, for testing encoders as pure functions (no engine, no server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import msgspec

from tinytitan.api.sse import SSE
from tinytitan.api.streaming import Encoder, encode_stream
from tinytitan.api.wire import encode
from tinytitan.engine.events import Event

__all__ = ["as_sent", "encoded", "event_stream", "frames"]


async def event_stream(items: Iterable[Event | BaseException]) -> AsyncGenerator[Event, None]:
    """Yield ``items`` in order; an exception among them is raised there (a generation that failed)."""
    for item in items:
        if isinstance(item, BaseException):
            raise item
        yield item


def frames(items: Iterable[Event | BaseException], encoder: Encoder[Any]) -> list[SSE]:
    """Everything ``encoder``'s stream of ``items`` sends, ending included (``encode_stream``): its
    frames as made, each one's ``data`` a wire struct (or the string ``[DONE]``)."""

    async def run() -> list[SSE]:
        return [frame async for frame in encode_stream(event_stream(items), encoder)]

    return asyncio.run(run())


def as_sent(data: Any) -> Any:
    """A frame's data as a client reads it: the JSON value its encoding decodes to (a string as it is)."""
    return data if isinstance(data, str) else msgspec.json.decode(encode(data))


def encoded(items: Iterable[Event | BaseException], encoder: Encoder[Any]) -> list[SSE]:
    """``frames``, each one's ``data`` as a client reads it (``as_sent``)."""
    return [SSE(as_sent(frame.data), frame.event) for frame in frames(items, encoder)]
