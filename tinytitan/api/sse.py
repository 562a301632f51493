"""SSE framed in one place: adapters yield ``SSE`` items; this module adds keepalives and frames.

Chat Completions frames are ``data: <json>`` lines; Responses and Messages name each ``event:``.
While the next event is slow (queued, prefill), a keepalive goes out every ``interval`` seconds:
an SSE comment line ``: ping`` alone on OpenAI streams (a comment with an empty ``data:`` field would
be dispatched as an event and break every OpenAI client's JSON parser), ``event: ping`` on Anthropic
ones (reference §1). Lines end in ``\n`` — what the OpenAI and Anthropic APIs send, and all that
simple parsers splitting on ``\n`` can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.types import Receive, Scope, Send

__all__ = ["KEEPALIVE_SECONDS", "SSE", "sse_response"]

KEEPALIVE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SSE:
    """One event: ``data`` is JSON-encoded unless it is already a string (``[DONE]``)."""

    data: Any
    event: str | None = None

    def message(self) -> ServerSentEventMessage:
        data = self.data if isinstance(self.data, str) else json.dumps(self.data, ensure_ascii=False)
        return ServerSentEventMessage(data=data, event=self.event, sep=_LF)


_LF = "\n"
_OPENAI_PING = ServerSentEventMessage(comment="ping", data=None, sep=_LF)
_ANTHROPIC_PING = SSE({"type": "ping"}, event="ping")


async def _with_keepalive(
    events: AsyncIterator[SSE], ping: ServerSentEventMessage, interval: float
) -> AsyncIterator[ServerSentEventMessage]:
    iterator = aiter(events)
    pending: asyncio.Task[SSE] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield ping
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield item.message()
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


def sse_response(
    events: AsyncIterator[SSE],
    request: Request[Any, Any, Any],
    *,
    anthropic: bool = False,
    on_close: Callable[[], None] | None = None,
) -> ServerSentEvent:
    """Frame ``events`` as SSE with the protocol's keepalive (interval from the app's settings).

    ``on_close`` runs when the stream ends for any reason (done, failed, client gone).
    """
    interval = float(request.app.state.get("keepalive_seconds", KEEPALIVE_SECONDS))
    ping = _ANTHROPIC_PING.message() if anthropic else _OPENAI_PING
    return _EventStream(_with_keepalive(events, ping, interval), on_close)
