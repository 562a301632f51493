"""One admitted generation: ``Job.events()`` waits for a slot, submits a row to the device worker and
turns what it hands back into events; ``Completion`` is the same run collected.

Per step the device worker hands the row's new tokens to the event loop; here they are detokenized
(the backend's ``Decoder``) and parsed (its ``OutputParser``) into events — one output at a time,
and when the reader has fallen behind, the text of the outputs it reads at once joined into fewer
events (``inbox.py``). A stop string ends the
row with a cancel; the output cap is the device's ``length``. A job is closed on every way out
(finished, failed, client gone, aborted at shutdown): closing cancels its row (the device drops it
before its next step) and frees its slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tinytitan.engine.device.batch import Row
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.inbox import Inbox, joined
from tinytitan.engine.loops import LoopGuard
from tinytitan.engine.models.base import Generation, Prompt
from tinytitan.engine.output.parser import ParseOptions
from tinytitan.engine.queue import Ticket
from tinytitan.engine.request import ValidatedRequest

if TYPE_CHECKING:
    from tinytitan.engine.device.worker import DeviceWorker
    from tinytitan.engine.models.manager import ModelManager

__all__ = ["Completion", "Host", "Job", "Rounds"]

log = logging.getLogger("tinytitan.engine")

Generate = Callable[[Generation], AsyncGenerator[Event, None]]
Rounds = Callable[[Generate, Generation], AsyncGenerator[Event, None]]  # several generations (memory, search)


class Host(Protocol):
    """What a ``Job`` reads of the Engine that admitted it (so this module never imports the Engine)."""

    @property
    def jobs(self) -> set[Job]: ...

    @property
    def device(self) -> DeviceWorker: ...

    @property
    def models(self) -> ModelManager: ...


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

    def __init__(
        self,
        engine: Host,
        request: ValidatedRequest,
        prompt: Prompt,
        max_new: int,
        ticket: Ticket,
        rounds: Rounds | None = None,
    ) -> None:
        self.engine = engine
        self.rounds = rounds  # the memory decorator's or a server-run tool search's rounds, else one generation
        self.request = request
        self.generation = Generation(request, prompt, max_new)
        self.ticket = ticket
        self._row: Row | None = None  # the row on the device now
        self._inbox: Inbox | None = None
        self._aborted: TinyTitanError | None = None
        self._closed = False
        engine.jobs.add(self)

    def close(self) -> None:
        """Stop and give up the slot — safe at any moment, any number of times.

        Protocol code calls this on every way out (an encoder that raised, a stream that never
        started, a client that left) so a job can never hold the slot after its request is over.
        The cancel reaches the device before any later request's row, so the slot is free at once.
        """
        self._leave()
        if not self._closed:
            self._closed = True
            self.engine.jobs.discard(self)
            self.ticket.release()

    @property
    def cancelled(self) -> bool:
        """Closed or aborted: the job's row (if any) has been told to stop."""
        return self._closed or self._aborted is not None

    def _leave(self) -> None:
        row, self._row = self._row, None
        if row is not None and not row.ended:
            self.engine.device.cancel(row)

    def abort(self, error: TinyTitanError) -> None:
        """End this job's events with ``error`` now, without waiting for the device (a long prefill
        chunk, or a collective with a rank that died, may not return soon)."""
        self._aborted = self._aborted or error
        self._leave()
        if self._inbox is not None:
            self._inbox.put(error)

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
                elif isinstance(event, Finished):
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
        """What the job yields once it holds its slot: one generation (the memory rounds run several)."""
        if self.rounds is not None:
            return self.rounds(self._generate, self.generation)
        return self._generate(self.generation)

    async def _generate(self, gen: Generation) -> AsyncGenerator[Event, None]:
        """Run ``gen`` on the device and yield its events as they come; a row that ends early
        (stop string, client gone) is cancelled on the way out."""
        if self._aborted is not None:
            raise self._aborted
        request = gen.request
        backend = self.engine.models.backend(request.model_id)
        parser = backend.output_parser(
            ParseOptions(
                stop=request.stop,
                namespaces={t.name: t.namespace for t in request.callable_tools},
                tools=request.callable_tools,
                start_in_reasoning=gen.prompt.start_in_reasoning,
            )
        )
        decoder = backend.decoder()
        window = self.engine.models.info(request.model_id).context_window
        asked = request.request.loop_guard
        loops = LoopGuard.for_request(request.request_id, request.cap, window, asked=asked)  # loops.py
        inbox = Inbox()
        self._inbox = inbox
        reason = "length"  # no room left for a token: nothing runs
        if gen.max_new > 0:
            row = Row(request.model_id, request, gen.prompt, gen.max_new, inbox.put, asyncio.get_running_loop())
            self._row = row
            self.engine.device.submit(row)
            reason = "stop"
        try:
            while gen.max_new > 0:
                items = await inbox.take()  # a reader behind the device reads several steps at once
                ready: list[list[Event]] = []  # each output's events
                finish: str | None = None
                stop = False
                failure: Exception | None = None
                try:
                    for item in items:
                        if isinstance(item, BaseException):
                            raise item
                        self.ticket.tick()
                        if item.error is not None:
                            _log_failure(request, item.error)
                            raise item.error if isinstance(item.error, TinyTitanError) else GenerationFailed()
                        if item.cached is not None:
                            gen.cached_tokens = item.cached
                        if item.tokens:
                            text = decoder.feed(item.tokens)
                            if item.finish is not None:
                                text += decoder.finish()
                            ready.append(events := parser.feed(text, len(item.tokens)))
                            if loops is not None and item.finish is None:
                                for event in events:  # prose and thought; a tool call's arguments are data
                                    if isinstance(event, (TextDelta, ReasoningDelta)):
                                        loops.feed(event.text)
                            # a stop string, or a verbatim loop without a cap of its own (it ends as if
                            # the cap were hit): the outputs after this one are never read
                            stop = parser.stopped is not None or (loops is not None and loops.cycle is not None)
                        elif item.finish is not None and (tail := decoder.finish()):
                            ready.append(parser.feed(tail, 0))
                        if item.finish is not None:
                            finish, stop = item.finish, True
                        if stop:
                            break
                except Exception as exc:
                    failure = exc
                for event in joined(ready):
                    yield event
                if failure is not None:
                    raise failure
                if finish is not None:
                    reason = finish
                if stop:
                    break
        finally:
            self._leave()
        for event in parser.finish():
            yield event
        if loops is not None and loops.cycle is not None:
            reason = "length"
            loops.ended(parser.completion_tokens)
        elif parser.tool_calls:
            reason = "tool_calls"
        elif parser.stopped is not None:
            reason = "stop"
        usage = Usage(
            prompt_tokens=gen.prompt.n_tokens,
            cached_tokens=gen.cached_tokens,
            completion_tokens=parser.completion_tokens,
            reasoning_tokens=parser.reasoning_tokens,
        )
        yield Finished(reason, usage, parser.stopped)


def _log_failure(request: ValidatedRequest, error: BaseException) -> None:
    if isinstance(error, TinyTitanError):
        log.warning("request %s failed: %s", request.request_id, error.message)
    else:
        log.error("request %s: generation failed: %r", request.request_id, error)
