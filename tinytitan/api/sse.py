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
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.types import Receive, Scope, Send

from tinytitan.api.wire import encode_text

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

    def message(self) -> ServerSentEventMessage:
        return ServerSentEventMessage(data=self.text(), event=self.event, sep=_LF)


_LF = "\n"
_COMMENT_PING = ServerSentEventMessage(comment="ping", data=None, sep=_LF)

Keepalive = Callable[[], "SSE | None"]
"""What goes out while the next event is slow: an event, or ``None`` for a transport-level ping."""


def no_event() -> SSE | None:
    return None


async def with_keepalive(
    events: AsyncIterator[SSE], keepalive: Keepalive, interval: float
) -> AsyncGenerator[SSE | None, None]:
    """``events``, with ``keepalive()`` in between whenever the next one takes over ``interval``
    seconds. It is called only while ``events`` is suspended waiting (every item it produced has
    been passed on), so an encoder can number it after the last event sent."""
    iterator = aiter(events)
    pending: asyncio.Task[SSE] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield keepalive()
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(iterator, "aclose", None)
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
