"""SSE framed in one place: adapters yield ``SSE`` items; this module adds keepalives and frames.

Chat Completions frames are ``data: <json>`` lines; Responses and Messages name each ``event:``.
While the next event is slow (queued, prefill), a keepalive goes out every ``interval`` seconds. The
protocol's encoder says what it is (``Encoder.keepalive``): a data-bearing event a client's parser
counts — ``event: ping`` on Anthropic streams, a repeated ``response.in_progress`` on Responses
streams (Codex's idle timer resets only on parsed events) — or, when it has none (Chat Completions),
an SSE comment line ``: ping`` alone (a comment with an empty ``data:`` field would be dispatched as
an event and break every OpenAI client's JSON parser). Reference §1. Lines end in ``\n`` — what the
OpenAI and Anthropic APIs send, and all that simple parsers splitting on ``\n`` can read.
``with_keepalive`` is the transport-neutral half, shared with the Responses WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

from litestar import Request
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.types import Receive, Scope, Send

from tinytitan.api.wire import encode, encode_text

__all__ = ["KEEPALIVE_SECONDS", "SSE", "Keepalive", "keepalive_interval", "no_event", "sse_response", "with_keepalive"]

KEEPALIVE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SSE:
    """One event: ``data`` (a wire struct) is JSON-encoded unless it is already a string (``[DONE]``)."""

    data: Any
    event: str | None = None

    def text(self) -> str:
        """The data as sent: JSON, or the string as it is (an SSE ``data:`` field, a WebSocket text frame)."""
        return self.data if isinstance(self.data, str) else encode_text(self.data)

    def frame(self) -> bytes:
        """The SSE frame: ``event:`` (if named), one ``data:`` line per line of the data, a blank line."""
        head = b"event: " + self.event.encode() + b"\n" if self.event is not None else b""
        if not isinstance(self.data, str):  # JSON: msgspec escapes every line break inside it
            return head + b"data: " + encode(self.data) + b"\n\n"
        lines = _LINE_BREAK.split(self.data)
        return head + "".join(f"data: {line}\n" for line in lines).encode() + b"\n"

    def message(self) -> ServerSentEventMessage:
        return _Framed(self.frame())


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # where an SSE data field's lines end (litestar's split)


class _Framed(ServerSentEventMessage):
    """A message whose bytes are made already (litestar's own ``encode`` builds them line by line)."""

    def __init__(self, raw: bytes) -> None:
        super().__init__(data=None)
        self.raw = raw

    def encode(self) -> bytes:
        return self.raw


_COMMENT_PING = _Framed(b": ping\n\n")

Keepalive = Callable[[], "SSE | None"]
"""What goes out while the next event is slow: an event, or ``None`` for a transport-level ping."""


def no_event() -> SSE | None:
    return None


async def with_keepalive(
    events: AsyncIterator[SSE], keepalive: Keepalive, interval: float
) -> AsyncGenerator[SSE | None, None]:
    """``events``, with ``keepalive()`` in between whenever the next one takes over ``interval``
    seconds. It is called only while ``events`` is suspended waiting (every item it produced has
    been passed on), so an encoder can number it after the last event sent.

    ``events`` runs in one task of its own for the whole stream (``_Pump``), ahead of the reader; the
    reader waits only when nothing is ready, and one timer per stream, not one task and timer per
    event, watches for the gap."""
    pump = _Pump(events, interval)
    try:
        while True:
            item = await pump.next()
            if item is _GAP:
                yield keepalive()
            elif item is _END:
                return
            else:
                yield cast(SSE, item)
    finally:
        await pump.close()


_GAP, _END = object(), object()


class _Pump:
    """Runs ``events`` in its own task; what it produced waits in ``ready`` until the reader takes it."""

    def __init__(self, events: AsyncIterator[SSE], interval: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._interval = interval
        self._ready: deque[SSE] = deque()
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._since = self._loop.time()  # when the reader began to wait
        self._iterator = aiter(events)
        self._task = asyncio.ensure_future(self._run())
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._since + interval, self._tick)

    async def _run(self) -> None:
        try:
            async for item in self._iterator:
                self._ready.append(item)
                self._wake()
        except Exception as exc:  # the reader raises it, after what came before
            self._error = exc
        finally:
            self._ended = True
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _tick(self) -> None:
        """The stream's one timer: a reader that has waited ``interval`` gets a keepalive."""
        due = self._since + self._interval
        if self._waiter is not None and self._loop.time() >= due:
            self._wake()  # nothing ready: the reader sends a keepalive
            due = self._loop.time() + self._interval
        self._timer = self._loop.call_at(due, self._tick)

    async def next(self) -> object:
        """The next item, ``_GAP`` after ``interval`` seconds of waiting, or ``_END``."""
        if not self._ready and not self._ended:
            self._since = self._loop.time()
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._ready:
            return self._ready.popleft()
        if self._ended:
            if self._error is not None:
                raise self._error
            return _END
        return _GAP

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        aclose = getattr(self._iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(BaseException):
                await aclose()


class _EventStream(ServerSentEvent):
    """A route's default media type must not override ``text/event-stream``; ``on_close`` runs when
    the ASGI response is over, however it ended — finished, failed, or cancelled because the client
    left (even before the first chunk, when no generator ``finally`` would run)."""

    def __init__(self, content: AsyncIterator[ServerSentEventMessage], on_close: Callable[[], None] | None) -> None:
        super().__init__(content)
        self._on_close = on_close

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = "text/event-stream"
        response = super().to_asgi_response(*args, **kwargs)
        on_close = self._on_close
        if on_close is None:
            return response

        async def respond(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await response(scope, receive, send)
            finally:
                on_close()

        return respond


def keepalive_interval(app_state: Any) -> float:
    """The keepalive interval the app was configured with (``--keepalive``)."""
    return float(app_state.get("keepalive_seconds", KEEPALIVE_SECONDS))


async def _framed(items: AsyncGenerator[SSE | None, None]) -> AsyncIterator[ServerSentEventMessage]:
    async with contextlib.aclosing(items):  # a client gone closes the source at once
        async for item in items:
            yield _COMMENT_PING if item is None else item.message()


def sse_response(
    events: AsyncIterator[SSE],
    request: Request[Any, Any, Any],
    *,
    keepalive: Keepalive = no_event,
    on_close: Callable[[], None] | None = None,
) -> ServerSentEvent:
    """Frame ``events`` as SSE with the protocol's keepalive (interval from the app's settings).

    ``on_close`` runs when the stream ends for any reason (done, failed, client gone).
    """
    interval = keepalive_interval(request.app.state)
    return _EventStream(_framed(with_keepalive(events, keepalive, interval)), on_close)
