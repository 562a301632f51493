"""The listening socket ``serve`` binds first (``tinytitan.api.listen``)."""

from __future__ import annotations

import socket

import pytest

from tinytitan.api.listen import ListenError, listen
from tinytitan.testing.process import free_port


def test_listen_binds_and_listens() -> None:
    port = free_port()
    sock = listen("127.0.0.1", port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # accepted into the backlog before any server runs
    finally:
        sock.close()


def test_a_taken_port_says_so() -> None:
    port = free_port()
    with listen("127.0.0.1", port), pytest.raises(ListenError, match=r"127\.0\.0\.1:\d+ is in use .*try --port"):
        listen("127.0.0.1", port)


def test_an_address_not_on_this_machine_says_check_host() -> None:
    with pytest.raises(ListenError, match=r"cannot listen on 192\.0\.2\.1:\d+: .*check --host"):
        listen("192.0.2.1", free_port())  # TEST-NET-1: never a local address


def test_connections_send_each_piece_at_once() -> None:
    """Nagle's algorithm is off on every accepted connection, plain or through asyncio (what uvicorn
    serves on): with it on, a response's body waited for the client's delayed ACK of its headers."""
    import asyncio

    sock = listen("127.0.0.1", 0)
    with sock, socket.create_connection(sock.getsockname(), timeout=5):
        accepted, _ = sock.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)

    async def through_asyncio() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listen("127.0.0.1", 0))
        async with server:
            _reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname())
            writer.close()
            return await asyncio.wait_for(seen, 5)

    assert asyncio.run(through_asyncio())
