"""A Responses WebSocket client for tests: send ``response.create`` events, read a whole turn back.

Every frame the server sends is checked against the Open Responses schema of its type (a stream
event, keepalives included, or the transport's error event) as it is read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tinytitan.testing.wire_schemas import check_socket_event

__all__ = ["TURN_ENDS", "SocketClient", "open_socket"]

TURN_ENDS = ("response.completed", "response.incomplete", "response.failed", "error")


class SocketClient:
    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection

    def send(self, event: dict[str, Any]) -> None:
        self.connection.send(json.dumps(event))

    def create(self, **body: Any) -> None:
        self.send({"type": "response.create", **body})

    def event(self, timeout: float = 60) -> dict[str, Any]:
        frame = self.connection.recv(timeout=timeout)
        assert isinstance(frame, str), f"a binary frame: {frame!r}"
        event: dict[str, Any] = json.loads(frame)
        check_socket_event(event)
        return event

    def turn(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Every event up to and including the turn's last (a terminal event, or an error event)."""
        events = [self.event(timeout)]
        while events[-1]["type"] not in TURN_ENDS:
            events.append(self.event(timeout))
        return events

    def run(self, **body: Any) -> list[dict[str, Any]]:
        self.create(**body)
        return self.turn()


@contextmanager
def open_socket(url: str, headers: dict[str, str] | None = None) -> Iterator[SocketClient]:
    """``url`` is the server's ``http://host:port``; the socket is ``ws://host:port/v1/responses``."""
    with connect(url.replace("http://", "ws://", 1) + "/v1/responses", additional_headers=headers) as connection:
        yield SocketClient(connection)
