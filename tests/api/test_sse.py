"""SSE framing (api/sse.py) byte for byte, driven through a Litestar app over raw ASGI calls.

The keepalive tests need no clock: the event source waits until the client has seen a keepalive,
so a ping must have been sent while the next event was slower than the interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from litestar import Litestar, Request, get
from litestar.datastructures import State
from litestar.response import ServerSentEvent
from litestar.types import HTTPDisconnectEvent, Message

from tinytitan.api.sse import SSE, no_event, sse_response
from tinytitan.testing import sse

OPENAI_PING = b": ping\n\n"
ANTHROPIC_PING = b'event: ping\ndata: {"type":"ping"}\n\n'


class Stream:
    """One SSE response served over ASGI: its chunks, its headers, and what happened to its source."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.headers: dict[str, str] = {}
        self.closed = 0  # on_close calls
        self.seen = asyncio.Event()  # a chunk arrived that `watch` was waiting for
        self.leave = asyncio.Event()  # the connection is over (the client left, or the response ended)
        self.watch: bytes | None = None

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    async def serve(self, events: AsyncIterator[SSE], *, anthropic: bool, interval: float = 60.0) -> None:
        @get("/")
        async def handler(request: Request[Any, Any, Any]) -> ServerSentEvent:
            keepalive = (lambda: SSE({"type": "ping"}, event="ping")) if anthropic else no_event
            return sse_response(events, request, keepalive=keepalive, on_close=self._on_close)

        app = Litestar([handler], state=State({"keepalive_seconds": interval}))
        scope: Any = {  # a hand-built HTTP scope
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"test")],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, self._receive, self._send)

    def _on_close(self) -> None:
        self.closed += 1

    async def _receive(self) -> HTTPDisconnectEvent:
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.chunks.append(message["body"])
                if message["body"] == self.watch:
                    self.seen.set()
            if not message.get("more_body", False):
                self.leave.set()  # as a server does, once the response is complete


async def listed(*items: SSE) -> AsyncIterator[SSE]:
    for item in items:
        yield item


def run(events: Callable[[Stream], AsyncIterator[SSE]], *, anthropic: bool = False, **kwargs: Any) -> Stream:
    async def main() -> Stream:
        stream = Stream()
        await stream.serve(events(stream), anthropic=anthropic, **kwargs)
        return stream

    return asyncio.run(main())


# -- framing -------------------------------------------------------------------------------------


def test_openai_frames_are_data_lines_and_done_goes_as_it_is() -> None:
    stream = run(lambda _s: listed(SSE({"a": "é"}), SSE("[DONE]")))
    assert stream.chunks == ['data: {"a":"é"}\n\n'.encode(), b"data: [DONE]\n\n"]
    assert stream.headers["content-type"].startswith("text/event-stream")


def test_named_events_carry_their_name() -> None:
    stream = run(lambda _s: listed(SSE({"type": "message_stop"}, event="message_stop")), anthropic=True)
    assert stream.body == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    assert sse.events(stream.body.decode()) == [("message_stop", {"type": "message_stop"})]


@pytest.mark.parametrize("anthropic", [False, True])
def test_every_line_ends_in_a_bare_line_feed(anthropic: bool) -> None:
    async def slow(stream: Stream) -> AsyncIterator[SSE]:
        yield SSE({"n": 1}, event="one")
        await stream.seen.wait()
        yield SSE({"n": 2})

    def events(stream: Stream) -> AsyncIterator[SSE]:
        stream.watch = ANTHROPIC_PING if anthropic else OPENAI_PING
        return slow(stream)

    stream = run(events, anthropic=anthropic, interval=0.01)
    assert b"\r" not in stream.body
    assert all(chunk.endswith(b"\n\n") for chunk in stream.chunks)


# -- keepalive -----------------------------------------------------------------------------------


def held_until_pinged(ping: bytes) -> Callable[[Stream], AsyncIterator[SSE]]:
    """A source whose one event comes only after the client has seen ``ping``."""

    async def source(stream: Stream) -> AsyncIterator[SSE]:
        await stream.seen.wait()
        yield SSE({"type": "late"}, event="late")

    def events(stream: Stream) -> AsyncIterator[SSE]:
        stream.watch = ping
        return source(stream)

    return events


def test_openai_keepalive_is_a_comment_line_only() -> None:
    stream = run(held_until_pinged(OPENAI_PING), interval=0.01)
    assert stream.chunks[0] == OPENAI_PING  # `: ping` and the blank line: no `data:` field at all
    assert set(stream.chunks[:-1]) == {OPENAI_PING}
    assert sse.frames(stream.body.decode()) == [sse.Frame("late", '{"type":"late"}')]  # a client sees no event


def test_anthropic_keepalive_is_a_ping_event() -> None:
    stream = run(held_until_pinged(ANTHROPIC_PING), anthropic=True, interval=0.01)
    assert stream.chunks[0] == ANTHROPIC_PING
    assert sse.events(stream.body.decode())[0] == ("ping", {"type": "ping"})


def test_no_keepalive_while_events_keep_coming() -> None:
    stream = run(lambda _s: listed(SSE({"n": 1}), SSE({"n": 2})))
    assert OPENAI_PING not in stream.chunks and len(stream.chunks) == 2


# -- the end of a stream ----------------------------------------------------------------------------


def test_on_close_runs_once_when_the_stream_is_done() -> None:
    stream = run(lambda _s: listed(SSE({"n": 1})))
    assert stream.closed == 1


def test_a_client_leaving_closes_the_source() -> None:
    finished: list[str] = []

    async def endless(stream: Stream) -> AsyncIterator[SSE]:
        try:
            yield SSE({"n": 0})
            stream.leave.set()  # the client disconnects after the first event
            while True:
                await asyncio.sleep(0.01)
                yield SSE({"n": 1})
        finally:
            finished.append("source closed")

    stream = run(endless)
    assert finished == ["source closed"]
    assert stream.closed == 1
