"""One Responses turn, whichever transport carries it (``POST /v1/responses`` or the WebSocket).

``start_turn`` maps the request and starts it: a generation on the engine (``GenerationTurn``), or —
when the last input item is ``{"type": "compaction_trigger"}`` (Codex's remote compaction v2) — a
compaction of the conversation through ``tinytitan.engine.passes.compaction`` (a ``WholeTurn``), whose
answer is exactly one ``compaction`` output item; with ``context_management`` past its threshold, a
compaction and then the answer from the compacted window (``compacting.CompactingTurn``). All are
encoded by the same ``OutputBuilder``: a turn
gives its event stream (``stream``; the transport adds the keepalives ``keepalive`` makes), or its
HTTP answer (``respond``). ``close`` frees what it holds, however the turn ended.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import msgspec
from litestar import Request, Response
from litestar.response import ServerSentEvent

from tinytitan.api.request_io import loop_guarded, until_disconnect
from tinytitan.api.sse import SSE, sse_response
from tinytitan.api.streaming import answer, encode_stream
from tinytitan.api.wire import Tagged
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.events import Usage
from tinytitan.engine.job import Job
from tinytitan.engine.passes.compaction import compact, require_messages
from tinytitan.engine.passes.server_side import is_due
from tinytitan.engine.request import Message, Sampling
from tinytitan.engine.service import Engine

from .compacting import CompactingTurn, compaction_threshold
from .encode import OutputBuilder, ResponsesStream, compaction_item, response_shell
from .items import InputItem
from .mapping import Resolver, to_chat_request
from .protocol import ResponsesRequest
from .wire import OutputItem
from .wire import Response as ResponseObject

__all__ = ["COMPACTION_TRIGGER", "Finished", "GenerationTurn", "Turn", "WholeTurn", "start_turn"]

log = logging.getLogger("tinytitan.api")

COMPACTION_TRIGGER = "compaction_trigger"

Finished = Callable[[ResponseObject, list[InputItem], list[InputItem]], None]
"""Called with a finished turn's response, its input items and the history before them (to store)."""


class Turn(Protocol):
    def stream(self) -> AsyncGenerator[SSE, None]: ...

    def keepalive(self) -> SSE: ...

    async def respond(self, request: Request[Any, Any, Any]) -> Response[ResponseObject] | ServerSentEvent: ...

    def close(self) -> None: ...


@dataclass
class GenerationTurn:
    job: Job
    encoder: ResponsesStream
    streaming: bool

    def stream(self) -> AsyncGenerator[SSE, None]:
        return encode_stream(self.job.events(), self.encoder)

    def keepalive(self) -> SSE:
        return self.encoder.keepalive()

    async def respond(self, request: Request[Any, Any, Any]) -> Response[ResponseObject] | ServerSentEvent:
        return await answer(request, self.job, self.encoder, stream=self.streaming)

    def close(self) -> None:
        self.job.close()


Output = tuple[list[OutputItem], Usage]


@dataclass
class WholeTurn:
    """A turn whose output comes whole from ``work`` (no tokens to stream): the compaction of the
    conversation into one ``compaction`` item, or a WebSocket warm-up (``generate: false``: no output,
    a response id to continue from)."""

    encoder: ResponsesStream
    work: Callable[[], Awaitable[Output]]
    streaming: bool

    def _finish(self, output: Output) -> list[Tagged]:
        events = self.encoder.builder.completed(*output)
        self.encoder.done()
        return events

    async def stream(self) -> AsyncGenerator[SSE, None]:
        builder = self.encoder.builder
        for frame in self.encoder.frames(builder.start()):
            yield frame
        try:
            events = self._finish(await self.work())
        except TinyTitanError as exc:
            events = builder.fail(exc)
        except Exception:
            log.exception("a turn failed")
            events = builder.fail(GenerationFailed())
        for frame in self.encoder.frames(events):
            yield frame

    def keepalive(self) -> SSE:
        return self.encoder.keepalive()

    async def respond(self, request: Request[Any, Any, Any]) -> Response[ResponseObject] | ServerSentEvent:
        if self.streaming:
            return sse_response(self.stream(), request, keepalive=self.keepalive)
        self._finish(await until_disconnect(request, self.work()))
        return Response(self.encoder.builder.response)

    def close(self) -> None:
        return None  # the work runs inside the stream (or the request): closing that cancels it


def _split_trigger(wire: ResponsesRequest) -> tuple[ResponsesRequest, bool]:
    """The request without its closing ``compaction_trigger`` item, and whether it had one."""
    items = wire.input
    last = items[-1] if isinstance(items, list) and items else None
    if isinstance(items, list) and isinstance(last, dict) and last.get("type") == COMPACTION_TRIGGER:
        return msgspec.structs.replace(wire, input=items[:-1]), True
    return wire, False


async def start_turn(
    engine: Engine,
    wire: ResponsesRequest,
    *,
    history: list[InputItem],
    resolve: Resolver,
    on_done: Finished,
    workspace: str | None = None,
    loop_guard: Mapping[str, str] | None = None,
    streaming: bool | None = None,
    generate: bool = True,
) -> Turn:
    """Map ``wire`` (continuing ``history``) and start it; refusals raise before anything is sent.

    ``streaming`` overrides the request's own ``stream`` (the WebSocket always streams);
    ``generate=False`` is the WebSocket's warm-up: the request is checked and remembered, nothing runs."""
    wire, compaction = _split_trigger(wire)
    if not generate and wire.input is None:  # a warm-up may send only instructions and tools (OpenAI's)
        wire = msgspec.structs.replace(wire, input=[])
    if streaming is None:
        streaming = bool(wire.stream)
    chat, current = to_chat_request(wire, history=history, resolve=resolve, workspace=workspace)
    chat = loop_guarded(chat, loop_guard or {})  # the request's (or the WebSocket upgrade's) headers
    store = wire.store is not False
    if not generate:  # every refusal a generation would meet (routing, validation, the context window)
        # a warm-up runs nothing, a compaction_trigger included: it is checked as the conversation
        if not any(m.role != "system" for m in chat.messages):  # nothing to answer yet: check the rest
            chat = replace(chat, messages=(*chat.messages, Message("user", "")))
        validated, _prompt = await engine.validate(chat)
        shell = response_shell(wire, model=validated.model_id, sampling=validated.sampling, store=store)
        encoder = ResponsesStream(OutputBuilder(shell), lambda response: on_done(response, current.items, history))

        async def warmed() -> Output:
            return [], Usage()

        return WholeTurn(encoder, warmed, streaming)
    if compaction:
        require_messages(chat.messages)
        served = engine.route(chat.model)[0]  # an unknown name is refused here, before any work
        shell = response_shell(wire, model=served, sampling=Sampling(temperature=0.0), store=store)
        # the compacted window replaces the conversation: what continues from it is the note alone
        encoder = ResponsesStream(OutputBuilder(shell), lambda response: on_done(response, [], []))

        async def compacted() -> Output:
            result = await compact(engine, chat)
            return [compaction_item(result)], result.usage

        return WholeTurn(encoder, compacted, streaming)
    window = engine.context_window(chat.model)
    threshold = compaction_threshold(wire.context_management, window)
    if threshold is not None and await is_due(engine, chat, threshold):
        served = engine.route(chat.model)[0]
        shell = response_shell(wire, model=served, sampling=chat.sampling, store=store)
        builder = OutputBuilder(shell, tools=wire.tools)
        encoder = ResponsesStream(builder, lambda response: on_done(response, current.items, history))
        return CompactingTurn(engine, replace(chat, stream=streaming), encoder, streaming)
    job = await engine.prepare(replace(chat, stream=streaming))
    with job.closed_on_error():
        shell = response_shell(wire, model=job.request.model_id, sampling=job.request.sampling, store=store)
        builder = OutputBuilder(shell, waiting=_waiting_for_a_slot(engine, job), tools=wire.tools)
        encoder = ResponsesStream(builder, lambda response: on_done(response, current.items, history))
        return GenerationTurn(job, encoder, streaming)


def _waiting_for_a_slot(engine: Engine, job: Job) -> Callable[[], bool]:
    """Whether ``job`` waits in the queue: not running yet, and every slot taken (``response.queued``)."""
    queue, ticket = engine.queue, job.ticket

    def waiting() -> bool:
        return not ticket.running and not ticket.released and queue.running >= queue.slots

    return waiting
