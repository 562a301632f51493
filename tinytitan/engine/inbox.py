"""What the device hands one ``Job``: its row's outputs in order, read all at once.

``take()`` waits for the first and returns every one that is there. When the reader has fallen
behind (a busy event loop, a slow client, a device faster than the host), several steps' outputs
wait; each is still decoded and parsed on its own (stop strings, token counts and the loop guard
see the same steps), and ``joined`` merges the text their events carry, so the client gets the same
text in fewer events (as vLLM does). A reader that keeps up gets exactly the events it got before.
"""

from __future__ import annotations

import asyncio
from collections import deque

from tinytitan.engine.device.batch import Output
from tinytitan.engine.events import Event, ReasoningDelta, TextDelta

__all__ = ["Inbox", "joined"]

Item = Output | BaseException


class Inbox:
    """A job's mailbox: ``put`` from the event loop (the device worker's hand-off, an abort)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> list[Item]:
        """Every item there is, after waiting for the first."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        items = list(self._items)
        self._items.clear()
        return items


def joined(groups: list[list[Event]]) -> list[Event]:
    """The events of several outputs read at once, in order, where one output's first event continues
    the text (or reasoning) the previous output's last event carried: joined into one. Within one
    output's events nothing changes — a reader that keeps up sees exactly one group."""
    out: list[Event] = []
    for group in groups:
        for i, event in enumerate(group):
            last = out[-1] if out else None
            if i == 0 and isinstance(event, (TextDelta, ReasoningDelta)) and type(last) is type(event):
                out[-1] = type(event)(last.text + event.text)
            else:
                out.append(event)
    return out
