"""Continuous batching for the mlx backend (``--max-concurrent N``), on mlx-lm's ``BatchGenerator``.

One runner thread owns the model and drives every generation as a row of one batch: each step
decodes one token for every running row, then prefills one chunk (``PREFILL_STEP`` tokens) of at
most one newcomer — so a newcomer's prompt never stalls the running streams for longer than one
chunk; with no stream to hold up, chunks are ``PREFILL_ALONE`` tokens (large products run faster).
A row joins at the next step and leaves the moment it ends, is stopped or is cancelled (its batch
slot is free at the next step). mlx-lm supplies the batched KV caches (``BatchKVCache``), the
prefill/decode interleaving and per-row samplers and logits processors; this module adds what
serving needs around them:

- the prompt cache per row: a row starts from the longest cached prefix (memory or disk), and its
  KV state is stored back when it leaves;
- per-row samplers — our ``sampling.Sampler``, the same one a lone request gets, each owning the
  request's own PRNG key, so a row draws from its own random stream whatever shares the batch —
  penalties and grammar masks, built from the row's own request; a processor that fails (a
  grammar the sampler left) fails its own row only;
- cancellation and stopping: a row whose ``cancel`` is set, or whose reader went away, is removed
  before the next step.

Job threads call ``submit`` and read the row's tokens from ``Row.out``: ints, then ``END`` (or an
exception). Detokenizing and parsing stay on the job thread, per request.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinytitan.engine import device_thread
from tinytitan.engine.backends.mlx.sampling import make_processors, make_sampler
from tinytitan.engine.errors import GenerationFailed, TinyTitanError
from tinytitan.engine.prompt_cache import PromptCache
from tinytitan.engine.request import Sampling

__all__ = ["END", "PREFILL_STEP", "BatchRunner", "Row", "drain"]

log = logging.getLogger("tinytitan.mlx")

PREFILL_STEP = 256  # prompt tokens per prefill step while other rows decode (the longest a newcomer holds them up)
PREFILL_ALONE = 2048  # … and while none does: BLIS multiplies 2048 rows ~3× faster a row than 256 (bench_decode.py)
END = object()  # the last item of a row's queue after a normal end


@dataclass(eq=False)
class Row:
    """One generation in the batch."""

    tokens: list[int]  # the whole prompt
    max_new: int
    sampling: Sampling
    cancel: threading.Event
    mask: Any = None  # a GrammarMask (built on the job thread), or None
    on_join: Callable[[int], None] | None = None  # told the reused prefix length before the first token
    out: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)
    gone: threading.Event = field(default_factory=threading.Event)  # the reader stopped reading
    error: BaseException | None = None
    decoding: bool = False  # its prompt is done and it has sampled a token

    def leave(self) -> None:
        """The reader is done with this row (stop string, cap, client gone): free its slot."""
        self.gone.set()

    def settle(self, timeout: float = 60.0) -> None:
        """After ``leave``: wait (a step at most) until the runner has let the row go, so its KV
        state is in the prompt cache before the generation returns — a next turn sent at once hits."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self.out.get(timeout=left)
            except queue.Empty:
                return
            if item is END or isinstance(item, BaseException):
                return

    @property
    def leaving(self) -> bool:
        return self.gone.is_set() or self.cancel.is_set()


def drain(inbox: queue.SimpleQueue[Row | None]) -> list[Row]:
    """Empty a runner's inbox without waiting: the rows not yet taken (a closing ``None`` dropped)."""
    rows: list[Row] = []
    while True:
        try:
            row = inbox.get_nowait()
        except queue.Empty:
            return rows
        if row is not None:
            rows.append(row)


class BatchRunner:
    def __init__(
        self,
        model: Any,
        prompt_cache: PromptCache,
        identity: str,
        eos: Sequence[int],
        max_rows: int,
        *,
        sampler: Callable[[Sampling], Any] = make_sampler,
        processors: Callable[[Sampling, Sequence[int], int], list[Any]] = make_processors,
        prefill_step: int = PREFILL_STEP,
        prefill_alone: int = PREFILL_ALONE,
        device: str | None = None,
    ) -> None:
        self.model = model
        self.device = device  # "cpu" where an accelerator is the default (a catalog's <id>@cpu)
        self.prompt_cache = prompt_cache
        self.identity = identity
        self.eos = list(eos)
        self.max_rows = max(1, max_rows)
        self.prefill_step = prefill_step
        self.prefill_alone = max(prefill_step, prefill_alone)
        self.make_sampler = sampler  # per row, from its request (a benchmark may swap it)
        self.make_processors = processors
        self.tokens_generated = 0  # every token sampled, ever (tests watch it for cancellation)
        self.peak_rows = 0  # the most rows one step decoded (tests, benchmarks)
        # per step: (rows decoded, prompt tokens prefilled, seconds) — tests, benchmarks
        self.steps: deque[tuple[int, int, float]] = deque(maxlen=4096)
        self._inbox: queue.SimpleQueue[Row | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- job threads ------------------------------------------------------------------------------
    def submit(self, row: Row) -> None:
        with self._lock:  # under the lock: a runner that fails can hand back every row it was given
            if self._closed:
                raise GenerationFailed("the model was unloaded")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tinytitan-batch", daemon=True)
                self._thread.start()
            self._inbox.put(row)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the runner thread (rows still running end with an error); the model is released."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._inbox.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self.model = None

    # -- the runner thread ------------------------------------------------------------------------
    def _run(self) -> None:
        from tinytitan.engine.backends.mlx.loading import device_context

        device_thread.claim()  # the CPU attention acts here only
        try:
            with device_context(self.device):
                self._loop()
        finally:
            device_thread.release()  # its MLX streams, or the process may abort at exit

    def _loop(self) -> None:
        from mlx_lm.generate import BatchGenerator

        gen = BatchGenerator(
            self.model,
            completion_batch_size=self.max_rows,
            prefill_batch_size=1,
            prefill_step_size=self.prefill_alone,  # its prompt batch's largest product; each step sets its own
        )
        rows: dict[int, Row] = {}
        error: BaseException = GenerationFailed("the model was unloaded")
        try:
            while True:
                self._drop_leavers(gen, rows)  # first: a leaver's KV is stored before a newcomer looks
                if not self._admit(gen, rows):
                    break
                if rows:
                    self._step(gen, rows)
        except Exception as exc:  # the batch itself failed: its rows end with the error
            log.exception("the batch runner failed")
            error = exc if isinstance(exc, TinyTitanError) else GenerationFailed()
        finally:
            with self._lock:  # the next submit starts a fresh runner; rows not yet taken fail now
                self._thread = None
                for waiting in drain(self._inbox):
                    rows[-id(waiting)] = waiting
            for row in rows.values():
                row.out.put(error)
            gen.close()

    def _admit(self, gen: Any, rows: dict[int, Row]) -> bool:
        """Take newcomers (waiting for one when idle); False when the runner is closed."""
        while True:
            try:
                row = self._inbox.get(block=not rows)
            except queue.Empty:
                return True
            if row is None:
                return False
            if row.leaving:
                row.out.put(END)
                continue
            try:
                uid = self._join(gen, row)
            except TinyTitanError as exc:
                row.out.put(exc)
                continue
            except Exception:
                log.exception("a generation could not start")
                row.out.put(GenerationFailed())
                continue
            rows[uid] = row

    def _join(self, gen: Any, row: Row) -> int:
        from mlx_lm.generate import StopSequences

        cache, reused = self.prompt_cache.fetch(row.tokens, self.identity)
        if row.on_join is not None:
            row.on_join(reused)
        processors = [self._guard(row, p) for p in self.make_processors(row.sampling, row.tokens, 0)]
        if row.mask is not None:
            processors.append(self._guard(row, row.mask))  # last: penalties cannot re-open a masked token
        (uid,) = gen.insert(
            [row.tokens[reused:]],
            max_tokens=[row.max_new],
            caches=[cache] if cache is not None else None,
            all_tokens=[list(row.tokens[:reused])],
            samplers=[self.make_sampler(row.sampling)],
            logits_processors=[processors],
            stop_sequences=[StopSequences([[e] for e in self.eos])],
        )
        return int(uid)

    @staticmethod
    def _guard(row: Row, processor: Any) -> Any:
        """A processor whose failure fails its own row, not the batch."""

        def guarded(tokens: Any, logits: Any) -> Any:
            if row.error is not None:
                return logits
            try:
                return processor(tokens, logits)
            except Exception as exc:
                row.error = exc
                return logits

        return guarded

    def _drop_leavers(self, gen: Any, rows: dict[int, Row]) -> None:
        leaving = [uid for uid, row in rows.items() if row.leaving or row.error is not None]
        if not leaving:
            return
        caches = gen.remove(leaving, return_prompt_caches=True)
        for uid in leaving:
            row = rows.pop(uid)
            cache, tokens = caches.get(uid, (None, None))
            if row.error is None:
                self._remember(cache, tokens)
                row.out.put(END)
            elif isinstance(row.error, TinyTitanError):
                row.out.put(row.error)
            else:
                log.error("a logits processor failed: %r", row.error)
                row.out.put(GenerationFailed())

    def _step(self, gen: Any, rows: dict[int, Row]) -> None:
        began = time.perf_counter()
        # mlx-lm reads the chunk size at each step: a short one only when it would hold up a stream
        gen.prefill_step_size = self.prefill_step if any(r.decoding for r in rows.values()) else self.prefill_alone
        with gen.stats() as stats:
            _prompts, responses = gen.next()
        self.steps.append((len(responses), stats.prompt_tokens, time.perf_counter() - began))
        self.peak_rows = max(self.peak_rows, len(responses))
        for response in responses:
            row = rows.get(response.uid)
            if row is None:
                continue
            self.tokens_generated += 1
            row.decoding = True
            if row.error is not None:
                continue  # sampled from unmasked logits: dropped, and the row fails before the next step
            row.out.put(int(response.token))
            if response.finish_reason is not None:
                del rows[response.uid]
                self._remember(response.prompt_cache, response.all_tokens)
                row.out.put(END)

    def _remember(self, cache: list[Any] | None, tokens: list[int] | None) -> None:
        """Store a leaving row's KV state (it holds exactly ``tokens``) in the prompt cache."""
        if not cache or not tokens:
            return
        offset = getattr(cache[0], "offset", None)
        if not isinstance(offset, int) or offset != len(tokens):
            return
        self.prompt_cache.store(list(tokens), cache, self.identity)
