"""Hand-made engine event streams, for testing encoders as pure functions (no engine, no server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable

from tinytitan.api.sse import SSE
from tinytitan.api.streaming import Encoder, encode_stream
from tinytitan.engine.events import Event

__all__ = ["encoded", "event_stream"]


async def event_stream(items: Iterable[Event | BaseException]) -> AsyncGenerator[Event, None]:
    """Yield ``items`` in order; an exception among them is raised there (a generation that failed)."""
    for item in items:
        if isinstance(item, BaseException):
            raise item
        yield item


def encoded(items: Iterable[Event | BaseException], encoder: Encoder) -> list[SSE]:
    """Everything ``encoder``'s stream of ``items`` sends, ending included (``encode_stream``)."""

    async def run() -> list[SSE]:
        return [frame async for frame in encode_stream(event_stream(items), encoder)]

    return asyncio.run(run())
