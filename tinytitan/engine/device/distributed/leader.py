"""Rank 0's batch: one request at a time, every step broadcast to the followers.

``LockstepBatch`` is the ``Batch`` the device worker steps on rank 0. ``add`` sends ``JOB`` and
the prompt and agrees on the prompt-cache prefix; each ``step`` is one unit of work — a prefill
chunk, or evaluating the logits (a collective), applying penalties and the grammar mask, sampling
and handing the token over — broadcast first so the other ranks compute the same thing. A row ends
with ``END`` on every rank, whatever the reason (end of turn, its cap, an error, a cancel). While
no row runs the worker calls ``idle`` every ``heartbeat`` seconds and a ``PING`` goes out.

If the group is lost (a collective raised, or the watchdog saw a deadline pass) the running row
fails with ``GroupLost``, later rows are refused, and ``on_lost`` is called once (the server then
exits non-zero).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.device.distributed.channel import Channel, GroupLost, Kind
from tinytitan.engine.device.distributed.lockstep import CacheOps, Session, chunks
from tinytitan.engine.device.mlx_batch import PREFILL_STEP
from tinytitan.engine.device.sampling import make_processors, make_sampler
from tinytitan.engine.errors import GenerationFailed, TinyTitanError

__all__ = ["LockstepBatch"]

log = logging.getLogger("tinytitan.distributed")

T = TypeVar("T")


@dataclass(eq=False)
class _Request:
    row: Row
    session: Session
    sizes: list[int]  # prefill chunks still to run (the last one gives the first logits)
    tail: list[int]
    sampler: Any
    processors: list[Any]
    seen: Any = None  # the tokens the penalties look at
    produced: int = 0
    last: int | None = None  # the token sampled last (broadcast with the next DECODE)
    outputs: list[Output] = field(default_factory=list)


class LockstepBatch(Batch):
    max_rows = 1

    def __init__(
        self,
        model: Any,
        channel: Channel,
        cache: CacheOps,
        eos: Sequence[int],
        *,
        heartbeat: float,
        on_lost: Callable[[GroupLost], None],
    ) -> None:
        self.model = model
        self.channel = channel
        self.cache = cache
        self.eos = frozenset(eos)
        self.prefill_step = PREFILL_STEP  # the batch runner's chunks, samplers and processors
        self.make_sampler = make_sampler
        self.make_processors = make_processors
        self.mask_for: Callable[[Row], Any] = lambda _row: None
        self.counted: Callable[[int], None] = lambda _n: None
        self.heartbeat = heartbeat
        self._on_lost = on_lost
        self.lost: GroupLost | None = None
        self._current: _Request | None = None
        self._lock = threading.Lock()

    @property
    def rows(self) -> int:
        return 0 if self._current is None else 1

    def wake_in(self) -> float | None:
        return 0.0 if self._current is not None else self.heartbeat

    def idle(self) -> None:
        self._guarded(lambda: self.channel.exchange(Kind.PING))

    def add(self, row: Row) -> list[Output]:
        if self.lost is not None:
            raise self.lost
        return self._guarded(lambda: self._start(row))

    def remove(self, row: Row) -> None:
        current = self._current
        if current is not None and current.row is row:
            self._guarded(lambda: self._end(current, keep=True, left=True))

    def step(self) -> list[Output]:
        current = self._current
        if current is None:
            return []
        return self._guarded(lambda: self._advance(current))

    def close(self) -> None:
        """Unload or a model switch: rank 0 keeps its shard for the life of the group."""

    def shutdown(self) -> None:
        """The server stops: the followers are told ``SHUTDOWN`` (they exit 0)."""
        if self.lost is None:
            self._guarded(lambda: self.channel.exchange(Kind.SHUTDOWN))

    def lose(self, error: GroupLost) -> None:
        """The group is gone: fail the running row, refuse new ones, tell ``on_lost`` (any thread)."""
        with self._lock:
            if self.lost is not None:
                return
            self.lost = error
            current, self._current = self._current, None
        log.error("distributed: %s", error.message)
        if current is not None:
            current.row.loop.call_soon_threadsafe(current.row.deliver, Output(current.row, error=error))
        self._on_lost(error)

    # -- the device thread -------------------------------------------------------------------------
    def _guarded(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except GroupLost as exc:
            self.lose(exc)
            raise
        except Exception as exc:  # a bug here would leave the followers waiting: fail loudly
            log.exception("the lockstep batch failed")
            lost = GroupLost(f"the lockstep runner failed: {exc!r}")
            self.lose(lost)
            raise lost from exc

    def _start(self, row: Row) -> list[Output]:
        channel = self.channel
        tokens = list(row.tokens)
        cache, reused = self.cache.fetch(tokens)
        channel.exchange(Kind.JOB, len(tokens), reused)
        channel.tokens(tokens, len(tokens))
        if channel.exchange(Kind.AGREE)[3] or cache is None:
            cache, reused = self.cache.fresh(), 0
        session = Session(self.model, channel, cache, tokens[:reused])
        request = _Request(row, session, [], tokens[reused:], None, [])
        self._current = request
        try:
            request.processors = self.make_processors(row.request.sampling, tokens, reused)
            mask = self.mask_for(row)
            if mask is not None:
                request.processors.append(mask)  # last: penalties cannot re-open a masked token
            request.sampler = self.make_sampler(row.request.sampling)
        except TinyTitanError as exc:
            return self._end(request, keep=False, error=exc)
        request.sizes = chunks(len(request.tail), self.prefill_step)
        return [Output(row, cached=reused)]

    def _advance(self, request: _Request) -> list[Output]:
        import mlx.core as mx

        session = request.session
        if len(request.sizes) > 1:  # a prefill chunk: no logits yet
            size = request.sizes.pop(0)
            self.channel.exchange(Kind.PREFILL, size, 0)
            session.prefill(request.tail[:size])
            request.tail = request.tail[size:]
            return []
        if request.sizes:  # the last chunk gives the first logits
            self.channel.exchange(Kind.PREFILL, len(request.tail), 1)
            request.sizes.clear()
            request.seen = mx.array(session.sequence[session.reused :] + request.tail)
            logits = session.forward(request.tail)
        else:
            assert request.last is not None
            self.channel.exchange(Kind.DECODE, request.last)
            request.seen = mx.concatenate([request.seen, mx.array([request.last])])
            logits = session.forward([request.last])
        try:
            for processor in request.processors:
                logits = processor(request.seen, logits)
            token = int(request.sampler(logits - mx.logsumexp(logits, keepdims=True)).item())
        except TinyTitanError as exc:
            return self._end(request, keep=False, error=exc)
        except Exception:
            log.exception("a distributed generation failed")
            return self._end(request, keep=False, error=GenerationFailed())
        request.produced += 1
        request.last = token
        self.counted(1)
        if token in self.eos:
            return self._end(request, keep=True, finish="stop")
        if request.produced >= request.row.max_new:
            return self._end(request, keep=True, finish="length", tokens=[token])
        return [Output(request.row, [token])]

    def _end(
        self,
        request: _Request,
        *,
        keep: bool,
        left: bool = False,
        finish: str | None = None,
        error: BaseException | None = None,
        tokens: list[int] | None = None,
    ) -> list[Output]:
        """``END`` on every rank (``b``: the reader left early); the KV state kept when whole."""
        self._current = None
        self.channel.exchange(Kind.END, int(keep), int(left))
        if keep:
            request.session.remember(self.cache)
        if left:
            return []
        return [Output(request.row, tokens or [], finish=finish, error=error)]
