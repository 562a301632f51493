"""Rank 0's generation thread: one request at a time, every step broadcast to the followers.

``submit`` hands a row over (the backend's job thread then reads its tokens from ``row.out``, as
with the batch runner); the runner thread sends ``JOB`` and the prompt, prefills chunk by chunk
(checking cancellation between chunks), and per token: evaluates the logits (a collective), applies
penalties and the grammar mask, samples, hands the token to the row and — unless the row ends
there (end of turn, the cap, a stop string or a client that left) — broadcasts it with ``DECODE``.
``END`` closes every request on every rank, whatever the reason. When idle it sends a ``PING``
every ``heartbeat`` seconds.

If the group is lost (a collective raised, or the watchdog saw a deadline pass) the running row
and every waiting row fail with ``GroupLost``, later submits are refused, and ``on_lost`` is called
once (the server then exits non-zero).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from tinytitan.engine import device_thread
from tinytitan.engine.backends.mlx.batch import END, PREFILL_STEP, Row, drain
from tinytitan.engine.backends.mlx.sampling import make_processors, make_sampler
from tinytitan.engine.distributed.channel import Channel, GroupLost, Kind
from tinytitan.engine.distributed.lockstep import CacheOps, Session, chunks
from tinytitan.engine.errors import GenerationFailed, TinyTitanError

__all__ = ["LockstepRunner"]

log = logging.getLogger("tinytitan.distributed")


class LockstepRunner:
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
        self.heartbeat = heartbeat
        self._on_lost = on_lost
        self.tokens_generated = 0  # every token sampled, ever (tests watch it for cancellation)
        self.lost: GroupLost | None = None
        self._inbox: queue.SimpleQueue[Row | None] = queue.SimpleQueue()
        self._current: Row | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="tinytitan-lockstep", daemon=True)
        self._thread.start()

    # -- job threads ------------------------------------------------------------------------------
    def submit(self, row: Row) -> None:
        with self._lock:
            if self.lost is not None:
                raise self.lost
            self._inbox.put(row)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the runner after the running row (followers are told ``SHUTDOWN``)."""
        self._inbox.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def lose(self, error: GroupLost) -> None:
        """The group is gone: fail the running and waiting rows, refuse new ones, tell ``on_lost``."""
        with self._lock:
            if self.lost is not None:
                return
            self.lost = error
            failed = [self._current] if self._current is not None else []
            failed += drain(self._inbox)
        log.error("distributed: %s", error.message)
        for row in failed:
            row.out.put(error)
        self._on_lost(error)

    # -- the runner thread ------------------------------------------------------------------------
    def _run(self) -> None:
        device_thread.claim()  # the CPU attention acts here only
        try:
            while self.lost is None:
                try:
                    row = self._inbox.get(timeout=self.heartbeat)
                except queue.Empty:
                    self.channel.exchange(Kind.PING)
                    continue
                if row is None:
                    self.channel.exchange(Kind.SHUTDOWN)
                    return
                if row.leaving:
                    row.out.put(END)
                    continue
                with self._lock:
                    self._current = row
                self._lead(row)
                with self._lock:
                    self._current = None
        except GroupLost as exc:
            self.lose(exc)
        except Exception as exc:  # a bug here would leave the followers waiting: fail loudly
            log.exception("the lockstep runner failed")
            self.lose(GroupLost(f"the lockstep runner failed: {exc!r}"))
        finally:
            device_thread.release()  # its MLX streams, or the process may abort at exit

    def _lead(self, row: Row) -> None:
        channel = self.channel
        tokens = row.tokens
        cache, reused = self.cache.fetch(tokens)
        channel.exchange(Kind.JOB, len(tokens), reused)
        channel.tokens(tokens, len(tokens))
        if channel.exchange(Kind.AGREE)[3] or cache is None:
            cache, reused = self.cache.fresh(), 0
        if row.on_join is not None:
            row.on_join(reused)
        session = Session(self.model, channel, cache, tokens[:reused])
        keep = True
        try:
            keep = self._generate(row, session, tokens[reused:])
        except GroupLost:
            raise
        except TinyTitanError as exc:
            keep = False
            row.out.put(exc)
        except Exception:
            log.exception("a distributed generation failed")
            keep = False
            row.out.put(GenerationFailed())
        channel.exchange(Kind.END, int(keep), int(row.leaving))  # b: the reader left early
        if keep:
            session.remember(self.cache)
            row.out.put(END)

    def _generate(self, row: Row, session: Session, tail: list[int]) -> bool:
        """Prefill and decode ``row``; False when it failed (its error already handed over)."""
        import mlx.core as mx

        processors = self.make_processors(row.sampling, row.tokens, session.reused)
        if row.mask is not None:
            processors.append(row.mask)  # last: penalties cannot re-open a masked token
        sampler = self.make_sampler(row.sampling)
        sizes = chunks(len(tail), self.prefill_step)
        for size in sizes[:-1]:
            if row.leaving:
                return True
            self.channel.exchange(Kind.PREFILL, size, 0)
            session.prefill(tail[:size])
            tail = tail[size:]
        if row.leaving:
            return True
        self.channel.exchange(Kind.PREFILL, len(tail), 1)
        seen = mx.array(session.sequence[session.reused :] + tail)
        logits = session.forward(tail)
        produced = 0
        while True:
            for processor in processors:
                logits = processor(seen, logits)
            token = int(sampler(logits - mx.logsumexp(logits, keepdims=True)).item())
            produced += 1
            self.tokens_generated += 1
            row.out.put(token)
            if token in self.eos or produced >= row.max_new or row.leaving:
                return True
            self.channel.exchange(Kind.DECODE, token)
            seen = mx.concatenate([seen, mx.array([token])])
            logits = session.forward([token])
