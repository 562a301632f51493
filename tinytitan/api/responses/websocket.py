"""Responses over WebSocket (issue 29): ``GET /v1/responses`` with ``Upgrade: websocket``.

The Open Responses WebSocket transport (2026-04-24) and OpenAI's "WebSocket mode" guide:

- the client sends ``{"type": "response.create", …}`` text frames whose body is the HTTP create body
  (``stream`` is implicit and ignored; ``background`` and ``stream_id`` lanes are refused); each runs
  as ONE turn through ``turn.start_turn`` — the same mapping, engine path and encoder as a POST;
- one response is in flight per connection: later ``response.create`` frames wait their turn (FIFO,
  at most ``MAX_WAITING``), so turns run sequentially;
- every stream event goes out as one JSON text frame (no SSE framing), keepalives included;
- ``previous_response_id`` continues from the newest response of this connection (kept in memory
  whatever its ``store``; only the newest) or from the server's store (``store`` true); anything
  else — a ``store: false`` response after a reconnect — is the error ``previous_response_not_found``;
  a continuation that fails (refused, or its stream failed) evicts the response it continued from;
- ``generate: false`` warms up: the request is checked and remembered, no output, its id chainable
  (``input`` may be left out: instructions and tools alone are OpenAI's documented warm-up);
- errors before a stream opens are ``{"type": "error", "status", "error": {type, code, message,
  param}}`` events (the OpenAI envelope); a stream that fails ends with ``response.failed``; the
  reader's own refusals (a binary frame, too many turns waiting) wait their turn like a
  ``response.create``, so they never land inside another response's stream;
- a continuation refused before its body decodes still evicts what it continued from;
- ``X-TinyTitan-Workspace`` on the upgrade request scopes memory for every turn of the connection;
- when the server shuts down, a turn in flight ends as its engine ends it (``response.failed``),
  turns still waiting get the ``server_shutting_down`` error, and the socket closes with 1001;
- a connection lives at most ``--websocket-max-age`` seconds (default 60 minutes): then the error
  ``websocket_connection_limit_reached`` and a normal close (clients reconnect);
- the upgrade passes the same auth / Host / Origin guard as HTTP (``tinytitan.api.guard``), which
  also answers 426 when WebSocket mode is off (``serve --no-websockets``): Codex then uses HTTP.

Codex's ``{"type": "response.processed"}`` acknowledgements are accepted and ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
from litestar import WebSocket, websocket
from litestar.exceptions import WebSocketDisconnect

from tinytitan.api.deps import EngineDep, StoreDep
from tinytitan.api.errors import openai_error
from tinytitan.api.request_io import decode_json
from tinytitan.api.sse import keepalive_interval, with_keepalive
from tinytitan.api.wire import encode_text
from tinytitan.engine.errors import InvalidRequest, QueueFull, ShuttingDown, TinyTitanError
from tinytitan.engine.service import Engine

from .items import InputItem
from .protocol import ResponsesRequest
from .store import ResponseStore, StoredResponse, finished
from .turn import start_turn
from .wire import Response
from .wire_events import SocketError

__all__ = ["DEFAULT_MAX_AGE", "MAX_WAITING", "ResponsesSocket", "Sessions", "responses_socket", "socket_error"]

log = logging.getLogger("tinytitan.api")

DEFAULT_MAX_AGE = 3600.0  # seconds: the 60-minute connection limit of the Open Responses transport
MAX_WAITING = 16  # response.create frames queued behind the one in flight
MAX_PENDING = 2 * MAX_WAITING  # frames and refusals waiting in all: beyond it the client is flooding
GOING_AWAY = 1001  # the close code of a server that shuts down (RFC 6455 §7.4.1)
POLICY = 1008  # ... of a client that keeps sending while everything waits

Inbox = str | TinyTitanError | None
"""A client frame's text, a refusal to send in its turn, or ``None``: the client is gone."""
_GONE = (WebSocketDisconnect, OSError)  # the client left (uvicorn's ClientDisconnected is an OSError)


def socket_error(exc: TinyTitanError) -> SocketError:
    """An error event: the OpenAI envelope's ``error`` with the HTTP status it stands for."""
    status, body = openai_error(exc)
    return SocketError(status, body.error)


class Sessions:
    """The open connections, so a server that shuts down can let each end its turn well-formed."""

    def __init__(self) -> None:
        self.open: set[ResponsesSocket] = set()
        self.closing = False

    async def shut_down(self, timeout: float) -> None:
        """Tell every connection to finish (``ResponsesSocket.shut_down``); wait at most ``timeout``."""
        self.closing = True
        waits = [asyncio.ensure_future(session.shut_down()) for session in list(self.open)]
        if waits:
            _done, pending = await asyncio.wait(waits, timeout=timeout)
            for wait in pending:
                wait.cancel()


class ResponsesSocket:
    """One WebSocket connection: a reader task queues frames; ``run`` answers them one at a time."""

    def __init__(
        self,
        socket: WebSocket[Any, Any, Any],
        engine: Engine,
        store: ResponseStore,
        *,
        interval: float,
        max_age: float,
        sessions: Sessions | None = None,
    ) -> None:
        self.socket = socket
        self.engine = engine
        self.store = store
        self.interval = interval
        self.max_age = max_age
        self.sessions = sessions or Sessions()
        self.workspace = socket.headers.get("x-tinytitan-workspace")  # the upgrade's, for every turn
        self.latest: StoredResponse | None = None  # the connection-local cache: its newest response
        self.inbox: asyncio.Queue[Inbox] = asyncio.Queue()
        self.waiting = 0  # response.create frames in the inbox
        self.current: asyncio.Task[None] | None = None
        self.gone = False
        self.closing = False
        self.finished = asyncio.Event()
        self._sending = asyncio.Lock()

    async def run(self) -> None:
        await self.socket.accept()
        self.sessions.open.add(self)
        try:
            if self.sessions.closing:
                await self._close_down()
                return
            await self._serve()
        finally:
            self.sessions.open.discard(self)
            self.finished.set()

    async def shut_down(self) -> None:
        """The server stops: the turn in flight ends as the engine ends it, the rest is refused."""
        self.closing = True
        self.inbox.put_nowait(ShuttingDown())  # wakes an idle connection
        await self.finished.wait()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_age
        reader = asyncio.ensure_future(self._read())
        try:
            while True:
                try:
                    item = await asyncio.wait_for(self.inbox.get(), timeout=deadline - loop.time())
                except TimeoutError:
                    await self._limit_reached()
                    return
                if item is None:
                    return
                if isinstance(item, str):
                    self.waiting -= 1
                if self.closing:
                    await self._refuse(item)
                    await self._close_down()
                    return
                if isinstance(item, TinyTitanError):
                    await self._send_error(item)
                    continue
                self.current = asyncio.ensure_future(self._handle(item))
                try:
                    await self.current
                except asyncio.CancelledError:
                    if not self.gone:
                        raise
                    return
                finally:
                    self.current = None
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader

    async def _refuse(self, item: Inbox) -> None:
        """While shutting down: a waiting turn is refused; a waiting refusal is still sent."""
        if isinstance(item, str):
            await self._send_error(ShuttingDown())
        elif item is not None and not isinstance(item, ShuttingDown):
            await self._send_error(item)

    async def _close_down(self) -> None:
        while not self.inbox.empty():
            await self._refuse(self.inbox.get_nowait())
        with contextlib.suppress(*_GONE):
            await self.socket.close(code=GOING_AWAY, reason="server shutting down")

    def _pending(self, item: str | TinyTitanError) -> bool:
        """Queue ``item`` behind the turn in flight; False when the client floods (then it is closed)."""
        if self.inbox.qsize() >= MAX_PENDING:
            return False
        if isinstance(item, str):
            self.waiting += 1
        self.inbox.put_nowait(item)
        return True

    async def _read(self) -> None:
        try:
            while True:
                message = await self.socket.receive()
                if message["type"] != "websocket.receive":
                    return
                text = message.get("text")
                item: str | TinyTitanError
                if text is None:
                    item = InvalidRequest("send JSON text frames, not binary ones", code="invalid_json")
                elif self.waiting >= MAX_WAITING:
                    item = QueueFull(f"more than {MAX_WAITING} responses waiting on this connection")
                else:
                    item = text
                if not self._pending(item):
                    reason = f"more than {MAX_PENDING} frames waiting on this connection"
                    with contextlib.suppress(*_GONE):
                        await self.socket.close(code=POLICY, reason=reason)
                    return
        except _GONE:
            return
        finally:
            self.gone = True
            if self.current is not None:
                self.current.cancel()  # a client gone frees its generation's slot at once
            self.inbox.put_nowait(None)

    async def _send(self, event: SocketError | str) -> None:
        text = event if isinstance(event, str) else encode_text(event)
        async with self._sending:
            await self.socket.send_text(text)

    async def _send_error(self, exc: TinyTitanError) -> None:
        with contextlib.suppress(*_GONE):
            await self._send(socket_error(exc))

    async def _limit_reached(self) -> None:
        minutes = f"{self.max_age / 60:g} minutes"
        message = f"Responses websocket connection limit reached ({minutes}). Create a new websocket connection."
        await self._send_error(InvalidRequest(message, code="websocket_connection_limit_reached"))
        with contextlib.suppress(*_GONE):
            await self.socket.close(code=1000, reason="connection limit reached")

    # -- one client frame ------------------------------------------------------------------------
    async def _handle(self, text: str) -> None:
        try:
            message = msgspec.json.decode(text)
        except msgspec.DecodeError:
            await self._send_error(InvalidRequest("malformed JSON event", code="invalid_json"))
            return
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "response.processed":
            return  # Codex acknowledges each response it has handled; nothing to do
        if kind != "response.create":
            what = f"client events of type {kind!r} are not supported" if kind else "a client event needs a type"
            await self._send_error(InvalidRequest(f"{what}; send response.create", param="type"))
            return
        await self._create(message)

    def _history(self, wire: ResponsesRequest) -> list[InputItem]:
        wanted = wire.previous_response_id
        if not wanted:
            return []
        found = self.latest if self.latest is not None and self.latest.id == wanted else self.store.get(wanted)
        if found is None:
            raise InvalidRequest(
                f"Previous response with id '{wanted}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found.conversation()

    def _done(self, response: Response, items: list[InputItem], history: list[InputItem]) -> None:
        stored = finished(response, items, history)
        if stored is not None:
            self.latest = stored
            if response.store:
                self.store.put(stored)

    def _evict(self, response_id: str | None) -> None:
        if response_id and self.latest is not None and self.latest.id == response_id:
            self.latest = None

    async def _create(self, message: dict[str, Any]) -> None:
        body = {k: v for k, v in message.items() if k not in ("type", "stream", "generate")}
        generate = message.get("generate", True)
        # read before anything can refuse the body: a refused continuation evicts what it named
        previous = body.get("previous_response_id")
        previous = previous if isinstance(previous, str) else None
        try:
            if "stream_id" in body:
                raise InvalidRequest(
                    "stream_id lanes are not supported: one response at a time per connection",
                    param="stream_id",
                    code="unsupported_value",
                )
            if not isinstance(generate, bool):
                raise InvalidRequest("generate must be a boolean", param="generate", code="invalid_json")
            wire = decode_json(msgspec.json.encode(body), ResponsesRequest)
            turn = await start_turn(
                self.engine,
                wire,
                history=self._history(wire),
                resolve=self.store.find_item,
                on_done=self._done,
                workspace=self.workspace,
                loop_guard=self.socket.headers,
                streaming=True,
                generate=generate,
            )
        except TinyTitanError as exc:
            self._evict(previous)
            await self._send_error(exc)
            return
        finished = False
        try:
            async with contextlib.aclosing(with_keepalive(turn.stream(), turn.keepalive, self.interval)) as frames:
                async for frame in frames:
                    if frame is not None:
                        finished = frame.event in ("response.completed", "response.incomplete")
                        await self._send(frame.text())
        except _GONE:
            self.gone = True
        finally:
            turn.close()
        if not finished and not self.gone:
            self._evict(previous)  # the continuation failed: what it continued from goes too


@websocket("/v1/responses")
async def responses_socket(socket: WebSocket[Any, Any, Any], engine: EngineDep, responses_store: StoreDep) -> None:
    """Serve one WebSocket connection of Responses turns."""
    state = socket.app.state
    max_age = float(state.get("websocket_max_age", DEFAULT_MAX_AGE))
    interval = keepalive_interval(state)
    sessions = state.get("websocket_sessions")
    session = ResponsesSocket(socket, engine, responses_store, interval=interval, max_age=max_age, sessions=sessions)
    await session.run()
