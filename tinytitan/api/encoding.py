"""Compressed request bodies: ``Content-Encoding: gzip``, ``deflate`` or ``zstd`` on any POST.

Codex compresses its request bodies with zstd in some set-ups (and other clients and proxies with
gzip), so the body is decoded here, before any route reads it — an ASGI middleware inside the
transport guard (``tinytitan.api.guard``), which has already checked the host, the key and the
content type. The decoded body goes on as if it had been sent plain (``content-length`` set, the
encoding header gone).

- Bounded: the compressed body and the decompressed one may each be at most the body limit
  (``--body-limit``; reference §1): decompression stops one byte past it, so a zip bomb is a 413
  ``request_too_large``, never memory spent.
- An encoding this server cannot decode → 415 ``unsupported_content_encoding`` naming it;
  ``identity`` is no encoding. Several encodings (``gzip, zstd``) are undone last first.
- A body that does not decode as its encoding says → 400 ``invalid_body`` naming the encoding.
- ``deflate`` is the zlib stream RFC 9110 means; a raw deflate stream (what some clients send) is
  read too. zstd comes from the ``zstandard`` package, imported on the first zstd body.

A WebSocket frame has no ``Content-Encoding``: its transport's compression is permessage-deflate,
which the server negotiates with any client that offers it (uvicorn's default, kept on).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPReceiveMessage, Receive, Scope, Send

from tinytitan.api.errors import is_anthropic, request_id_of
from tinytitan.api.guard import refusal
from tinytitan.engine.errors import InvalidRequest, RequestTooLarge, TinyTitanError, UnsupportedMediaType

__all__ = ["ENCODINGS", "decoded_bodies", "decompress"]

ENCODINGS = ("gzip", "deflate", "zstd")
_ALIASES = {"x-gzip": "gzip"}
_CHUNK = 64 * 1024


class _Disconnected(Exception):
    """The client left before sending the whole body: nobody to answer."""


def _too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(f"the decompressed request body exceeds the {limit}-byte limit")


def _zlib(body: bytes, wbits: int, limit: int) -> bytes:
    """Decode ``body`` (gzip members one after another, or one zlib / raw deflate stream) up to ``limit``."""
    out = bytearray()
    data = body
    while data:
        stream = zlib.decompressobj(wbits)
        out += stream.decompress(data, limit + 1 - len(out))
        while stream.unconsumed_tail and len(out) <= limit:
            out += stream.decompress(stream.unconsumed_tail, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_large(limit)
        if not stream.eof:
            raise zlib.error("the stream ends before its end marker")
        data = stream.unused_data if wbits > 16 else b""  # only gzip has members after members
    return bytes(out)


def _deflate(body: bytes, limit: int) -> bytes:
    try:
        return _zlib(body, zlib.MAX_WBITS, limit)
    except zlib.error:
        return _zlib(body, -zlib.MAX_WBITS, limit)  # a raw deflate stream, without the zlib wrapper


def _zstd(body: bytes, limit: int) -> bytes:
    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True) as reader:
        while chunk := reader.read(min(_CHUNK, limit + 1 - len(out))):
            out += chunk
            if len(out) > limit:
                raise _too_large(limit)
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": lambda body, limit: _zlib(body, 16 + zlib.MAX_WBITS, limit),
    "deflate": _deflate,
    "zstd": _zstd,
}


def _encodings(value: str) -> list[str]:
    """The encodings a ``Content-Encoding`` value lists, in the order they were applied; each one this
    server cannot decode refused by name."""
    names = [_ALIASES.get(name, name) for name in (part.strip().lower() for part in value.split(",")) if name]
    names = [name for name in names if name != "identity"]
    for name in names:
        if name not in _DECODERS:
            raise UnsupportedMediaType(
                f"Content-Encoding '{name}' is not supported; send the body plain or as {', '.join(ENCODINGS)}",
                code="unsupported_content_encoding",
            )
    return names


def decompress(body: bytes, content_encoding: str, limit: int) -> bytes:
    """``body`` with every encoding of ``content_encoding`` undone, at most ``limit`` bytes."""
    for name in reversed(_encodings(content_encoding)):
        try:
            body = _DECODERS[name](body, limit)
        except TinyTitanError:
            raise
        except Exception as exc:  # zlib.error, zstandard.ZstdError: what the bytes were is the client's
            raise InvalidRequest(f"the body is not valid {name} data: {exc}", code="invalid_body") from exc
    return body


async def _read(receive: Receive, limit: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect: the client left mid-body
            raise _Disconnected
        body += message["body"]
        if len(body) > limit:
            raise RequestTooLarge(f"the request body exceeds the {limit}-byte limit")
        if not message.get("more_body", False):
            return bytes(body)


def decoded_bodies(app: ASGIApp, limit: int) -> ASGIApp:
    """``app`` with compressed request bodies decoded (or refused) before it sees them."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        headers = list(scope.get("headers", []))
        encoding = ", ".join(v.decode("latin-1") for k, v in headers if k.lower() == b"content-encoding")
        if not encoding:
            await app(scope, receive, send)
            return
        try:
            body = decompress(await _read(receive, limit), encoding, limit)
        except _Disconnected:
            return
        except TinyTitanError as exc:
            names = {k.decode("latin-1").lower() for k, _ in headers}
            anthropic = is_anthropic(scope.get("path", ""), names)
            for event in refusal(exc, anthropic=anthropic, request_id=request_id_of(scope)):
                await send(event)
            return
        kept = [(k, v) for k, v in headers if k.lower() not in (b"content-encoding", b"content-length")]
        kept = [(k, v) for k, v in kept if k.lower() != b"transfer-encoding"]
        plain: Any = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        sent = False

        async def replay() -> HTTPReceiveMessage:
            nonlocal sent
            if sent:
                message: HTTPReceiveMessage = await receive()  # type: ignore[assignment]  # HTTP scope
                return message  # after the body: what the client does next (a disconnect)
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(plain, replay, send)

    return middleware
