"""One way to answer a prepared job, for every protocol: stream it, or collect it into an object.

A protocol supplies an ``Encoder``: what its stream says first, what each engine event becomes,
what a failure becomes, what ends the stream, and the object of a non-streaming answer.
``encode_stream`` drives it — and ends every stream the same way: a generation that raised, or
whose events ended without ``Finished`` (cut short), gets the protocol's error frame; then the
encoder's ``end`` frames (Chat's ``[DONE]``) follow in every case. ``answer`` is the route skeleton
shared by the three protocols: stream or collect, and the job is closed (its slot freed) however
the request ends.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from litestar import Request, Response
from litestar.response import ServerSentEvent

from tinytitan.api.request_io import until_disconnect
from tinytitan.api.sse import SSE, sse_response
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.events import Event, Finished
from tinytitan.engine.job import Completion, Job

__all__ = ["AnswerT", "Continued", "Encoder", "answer", "encode_stream"]

log = logging.getLogger("tinytitan.api")


AnswerT = TypeVar("AnswerT", bound=msgspec.Struct)
_Answer_co = TypeVar("_Answer_co", bound=msgspec.Struct, covariant=True)


class Encoder(Protocol[_Answer_co]):
    """A protocol's encoding of one generation (a fresh one per request); its frames' data and its
    answer are the protocol's ``wire`` structs."""

    def start(self) -> list[SSE]:
        """What the stream says before any event (sent at once, even while queued)."""
        ...

    def feed(self, event: Event) -> list[SSE]:
        """The frames one engine event becomes (``Finished`` included)."""
        ...

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        """The error frame(s) of a stream that cannot finish."""
        ...

    def end(self) -> list[SSE]:
        """Frames after the last event or the failure (Chat's ``[DONE]``)."""
        ...

    def keepalive(self) -> SSE | None:
        """The event sent while the next one is slow, or ``None`` for a comment line (``tinytitan.api.sse``)."""
        ...

    def object(self, result: Completion) -> _Answer_co:
        """The non-streaming answer (the protocol's ``wire`` struct)."""
        ...


class Continued(Generic[AnswerT]):
    """``encoder`` for events that continue a stream it has already started (the answer after a
    server-side compaction): the same encoding, without a second ``start``."""

    def __init__(self, encoder: Encoder[AnswerT]) -> None:
        self.encoder = encoder

    def start(self) -> list[SSE]:
        return []

    def feed(self, event: Event) -> list[SSE]:
        return self.encoder.feed(event)

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return self.encoder.fail(exc)

    def end(self) -> list[SSE]:
        return self.encoder.end()

    def keepalive(self) -> SSE | None:
        return self.encoder.keepalive()

    def object(self, result: Completion) -> AnswerT:
        return self.encoder.object(result)


async def encode_stream(events: AsyncGenerator[Event, None], encoder: Encoder[Any]) -> AsyncGenerator[SSE, None]:
    """The protocol's stream of ``events``; closing it (a client gone) closes ``events`` too."""
    for item in encoder.start():
        yield item
    failure: TinyTitanError | None = None
    finished = False
    async with contextlib.aclosing(events):
        try:
            async for event in events:
                for item in encoder.feed(event):
                    yield item
                if isinstance(event, Finished):
                    finished = True
                    break
        except TinyTitanError as exc:
            failure = exc
        except Exception:
            log.exception("a stream failed")
            failure = GenerationFailed()
    if not finished:
        for item in encoder.fail(failure or GenerationFailed("generation ended without finishing")):
            yield item
    for item in encoder.end():
        yield item


async def answer(
    request: Request[Any, Any, Any], job: Job, encoder: Encoder[AnswerT], *, stream: bool
) -> Response[AnswerT] | ServerSentEvent:
    """Stream ``job`` as SSE, or collect it into the protocol's object; the job is always closed."""
    with job.closed_on_error():
        if stream:
            events = encode_stream(job.events(), encoder)
            return sse_response(events, request, keepalive=encoder.keepalive, on_close=job.close)
        result = await until_disconnect(request, job.collect())
    return Response(encoder.object(result))
