"""Reading a request body into wire types, and noticing a client that went away."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import InternalServerException

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest

__all__ = ["LOOP_GUARD_HEADER", "decode_json", "loop_guarded", "read_json", "until_disconnect"]

LOOP_GUARD_HEADER = "x-tinytitan-loop-guard"

T = TypeVar("T")
_PATH = re.compile(r"- at `\$\.?(.*)`$")
_TYPES = re.compile(r"^Expected `(.+?)`, got `(.+?)`")
_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}


def _types(spec: str) -> str:
    """msgspec's ``int | null`` in words: "an integer or null"."""
    parts = [_WORDS.get(part.strip(), part.strip()) for part in spec.split("|")]
    return " or ".join(parts)


def _validation_message(detail: str, param: str | None) -> str:
    """A well-formed body that does not fit the wire type: the field and what it should be."""
    where = f"{param}: this field" if param else "the request body"  # `param: …`, as every refusal names it
    wrong = _TYPES.match(detail)
    if wrong:
        return f"{where} has the wrong type: expected {_types(wrong.group(1))}, got {_types(wrong.group(2))}"
    return (f"{param}: " if param else "") + f"invalid value: {_PATH.sub('', detail).strip()}"


def decode_json(body: bytes, wire_type: type[T]) -> T:
    """Decode ``body`` as ``wire_type``; a malformed, wrong-typed or too deeply nested body → 400 ``invalid_json``."""
    try:
        return msgspec.json.decode(body, type=wire_type)
    except msgspec.ValidationError as exc:
        detail = str(exc)
        match = _PATH.search(detail)
        param = match.group(1) if match and match.group(1) else None
        raise InvalidRequest(_validation_message(detail, param), param=param, code="invalid_json") from exc
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"malformed JSON request: {exc}", code="invalid_json") from exc
    except RecursionError as exc:  # msgspec's nesting limit (the interpreter's recursion limit)
        raise InvalidRequest("malformed JSON request: nested too deeply", code="invalid_json") from exc


async def read_json(request: Request[Any, Any, Any], wire_type: type[T]) -> T:
    try:
        body = await request.body()
    except InternalServerException as exc:  # Litestar's word for "the client left mid-body"
        raise InvalidRequest("the client disconnected before sending the whole body", code="incomplete_body") from exc
    return decode_json(body, wire_type)


async def until_disconnect(request: Request[Any, Any, Any], work: Awaitable[T]) -> T:
    """Await ``work``; if the client disconnects first, cancel it (which frees its queue slot)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                task.cancel()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        return await task
    finally:
        watcher.cancel()


def loop_guarded(chat: ChatRequest, headers: Mapping[str, str]) -> ChatRequest:
    """``chat``, watched for a verbatim loop even under a cap of its own when the client sends
    ``x-tinytitan-loop-guard: on`` (``tinytitan launch`` has every agent send it: the cap it hands
    over is for planning compaction, and a small model's loop would otherwise run to it)."""
    if headers.get(LOOP_GUARD_HEADER, "").strip().lower() in ("on", "1", "true", "yes"):
        return replace(chat, loop_guard=True)
    return chat
