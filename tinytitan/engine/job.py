"""One admitted generation: ``Job.events()`` waits for a slot, runs the backend on the engine's
generation thread and yields its events; ``Completion`` is the same run collected.

A job is closed on every way out (finished, failed, client gone, aborted at shutdown): closing
cancels its generation within a token and frees its slot once the generation thread lets go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinytitan.engine.backends.base import Backend, Generation, Prompt
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.output_parser import ParseOptions
from tinytitan.engine.queue import Ticket
from tinytitan.engine.request import ValidatedRequest

if TYPE_CHECKING:
    from tinytitan.engine.service import Engine

__all__ = ["Completion", "Job"]

log = logging.getLogger("tinytitan.engine")

_DONE = object()


@dataclass(slots=True)
class Completion:
    """A whole generation, collected (for non-streaming answers); ``events`` in the order they came."""

    reasoning: str
    text: str
    tool_calls: list[ToolCall]
    finished: Finished
    events: list[Event]


class Job:
    """One admitted generation; iterate ``events()`` exactly once (or ``collect()``)."""

    def __init__(self, engine: Engine, request: ValidatedRequest, prompt: Prompt, max_new: int, ticket: Ticket):
        self.engine = engine
        self.request = request
        self.generation = Generation(request, prompt, max_new)
        self.ticket = ticket
        self._worker: asyncio.Future[Any] | None = None
        self._inbox: asyncio.Queue[Any] | None = None  # what the running generation hands over
        self._aborted: TinyTitanError | None = None
        engine.jobs.add(self)

    @property
    def cancel(self) -> threading.Event:
        return self.generation.cancel

    def close(self) -> None:
        """Stop and give up the slot — safe at any moment, any number of times.

        Protocol code calls this on every way out (an encoder that raised, a stream that never
        started, a client that left) so a job can never hold the slot after its request is over.
        """
        self.cancel.set()
        self.engine.jobs.discard(self)
        worker = self._worker
        if worker is None or worker.done():
            self.ticket.release()
        else:
            # the worker checks `cancel` every token: the slot frees the moment it stops
            worker.add_done_callback(lambda _f: self.ticket.release())

    def abort(self, error: TinyTitanError) -> None:
        """End this job's events with ``error`` now, without waiting for its generation thread
        (a long prefill chunk, or a collective with a rank that died, may not return soon)."""
        self._aborted = self._aborted or error
        self.cancel.set()
        if self._inbox is not None:
            self._inbox.put_nowait(error)

    @contextlib.contextmanager
    def closed_on_error(self) -> Iterator[Job]:
        """``with job.closed_on_error():`` — any exception in the block closes the job (frees the slot).

        The block may hand the job's stream to a response and leave normally; then the response's
        own ``on_close`` closes it when the stream ends.
        """
        try:
            yield self
        except BaseException:
            self.close()
            raise

    async def collect(self) -> Completion:
        reasoning: list[str] = []
        text: list[str] = []
        calls: list[ToolCall] = []
        collected: list[Event] = []
        finished = Finished("stop")
        async with contextlib.aclosing(self.events()) as events:
            async for event in events:
                collected.append(event)
                if isinstance(event, ReasoningDelta):
                    reasoning.append(event.text)
                elif isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ToolCall):
                    calls.append(event)
                else:
                    finished = event
        return Completion("".join(reasoning), "".join(text), calls, finished, collected)

    async def events(self) -> AsyncGenerator[Event, None]:
        try:
            await self.ticket.wait()
            async with contextlib.aclosing(self._rounds()) as rounds:
                async for event in rounds:
                    yield event
        finally:
            self.close()

    def _rounds(self) -> AsyncGenerator[Event, None]:
        """What the job yields once it holds its slot: one generation (the memory loop runs several)."""
        return self._generate(self.generation)

    async def _generate(self, gen: Generation) -> AsyncGenerator[Event, None]:
        """Run ``gen`` on the generation thread and yield its events as they come."""
        if self._aborted is not None:
            raise self._aborted
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._inbox = queue

        def emit(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        self._worker = self.engine.run_worker(lambda: self._work(gen, emit))
        while True:
            item = await queue.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            yield item

    # runs on the generation thread
    def _work(self, gen: Generation, emit: Callable[[Any], None]) -> None:
        request = gen.request
        try:
            with self.engine.models.use(request.model_id) as backend:  # a switch to its model waits here
                self._decode(backend, gen, emit)
        except TinyTitanError as exc:
            log.warning("request %s failed: %s", request.request_id, exc.message)
            emit(exc)
        except Exception:
            log.exception("request %s: generation failed", request.request_id)
            emit(GenerationFailed())
        finally:
            emit(_DONE)

    def _decode(self, backend: Backend, gen: Generation, emit: Callable[[Any], None]) -> None:
        request = gen.request
        reason = "stop"
        parser = backend.output_parser(
            ParseOptions(
                stop=request.stop,
                namespaces={t.name: t.namespace for t in request.tools},
                tools=request.tools,
                start_in_reasoning=gen.prompt.start_in_reasoning,
            )
        )
        pieces = backend.generate(gen)
        try:
            for piece in pieces:
                if gen.cancel.is_set():
                    return
                if piece.finish:
                    reason = piece.finish
                for event in parser.feed(piece.text, piece.tokens):
                    emit(event)
                if parser.stopped is not None:
                    break
                if parser.completion_tokens >= gen.max_new:
                    reason = "length"
                    break
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()
        if gen.cancel.is_set():
            return
        for event in parser.finish():
            emit(event)
        if parser.tool_calls:
            reason = "tool_calls"
        usage = Usage(
            prompt_tokens=gen.prompt.n_tokens,
            cached_tokens=gen.cached_tokens,
            completion_tokens=parser.completion_tokens,
            reasoning_tokens=parser.reasoning_tokens,
        )
        emit(Finished(reason, usage, parser.stopped))
