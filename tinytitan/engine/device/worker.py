"""``DeviceWorker``: the one thread that loads models and steps the resident model's batch.

    event loop ── submit / cancel / activate / unload / close ──► command queue
                                                                     │
    device thread:  commands ─► admit pending rows in arrival order ─► batch.step()
                                (a row for another model waits until the batch is empty,
                                 then the model switches: ordering in the queue, not a lock)
                    ◄── per step and event loop, every row's Output (mailbox.py) ──┘

A model switch, a warm-up load and an unload are items of the same FIFO as the rows, so requests
keep their arrival order across models. A cancelled row leaves the batch before the next step.
The worker never waits on the event loop; the loop never waits on the worker (it awaits futures).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tinytitan.engine.device.batch import Batch, Output, Resident, Row, fail_rows
from tinytitan.engine.device.mailbox import Mailboxes
from tinytitan.engine.errors import GenerationFailed, ShuttingDown, TinyTitanError

__all__ = ["DeviceWorker", "Switch"]

log = logging.getLogger("tinytitan.models")


@dataclass(frozen=True, slots=True)
class Switch:
    """One change of resident model (kept for tests and benchmarks; also logged)."""

    previous: str | None
    current: str
    unload_s: float
    load_s: float


@dataclass(slots=True)
class _Barrier:
    """Activate (``model_id``), unload (``model_id`` None) or ``call`` once every earlier row has left."""

    model_id: str | None
    done: concurrent.futures.Future[Any]
    call: Callable[[], Any] | None = None


_CLOSE = object()


class DeviceWorker:
    """``backend_of(model_id)`` builds or returns a model's backend (facts only; the worker loads it)."""

    def __init__(self, backend_of: Callable[[str], Resident], *, log_loads: bool = True) -> None:
        self._backend_of = backend_of
        self._log_loads = log_loads
        self._commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: deque[Row | _Barrier] = deque()
        self._active: dict[int, Row] = {}
        self._lock = threading.Lock()  # guards _pending/_active against ``fail`` from another thread
        self._thread: threading.Thread | None = None
        self._closed = False
        self.resident: str | None = None
        self.batch: Batch | None = None
        self.switches: list[Switch] = []
        self.steps = 0  # batch steps taken, ever (tests count a cancelled row's way out in steps)

    # -- any thread -----------------------------------------------------------------------------
    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def submit(self, row: Row) -> None:
        self._send(row)

    def cancel(self, row: Row) -> None:
        row.cancelled = True  # seen at once by a prefill chunk running now (it leaves between layers)
        self._send(("cancel", row))

    def activate(self, model_id: str) -> concurrent.futures.Future[Any]:
        """Load ``model_id`` (after the rows before it); the future holds its backend or the error."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._send(_Barrier(model_id, done))
        return done

    def unload(self) -> concurrent.futures.Future[Any]:
        """Release the resident model's weights and prompt cache; the future holds True if one was."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._send(_Barrier(None, done))
        return done

    def run(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Call ``fn`` on the device thread once every row before it has left; the future holds its result."""
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._send(_Barrier(None, done, fn))
        return done

    def close(self) -> None:
        """Stop after the current step; rows still waiting or running end with ``ShuttingDown``."""
        with self._lock:
            self._closed = True
            started = self._thread is not None
        if started:
            self._commands.put(_CLOSE)

    def join(self, timeout: float | None = None) -> bool:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def fail(self, error: BaseException) -> None:
        """End every waiting and running row with ``error`` now, from any thread (a distributed
        group lost while the device thread may be stuck in a collective)."""
        with self._lock:
            rows = [r for r in self._pending if isinstance(r, Row)] + list(self._active.values())
        _deliver(fail_rows(rows, error))

    def _send(self, command: Any) -> None:
        with self._lock:
            if self._closed:
                if isinstance(command, Row):
                    _deliver([Output(command, error=ShuttingDown())])
                elif isinstance(command, _Barrier):
                    command.done.set_exception(ShuttingDown())
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tinytitan-device", daemon=True)
                self._thread.start()
            self._commands.put(command)

    # -- the device thread ------------------------------------------------------------------------
    def _run(self) -> None:
        from tinytitan.engine.device import thread as device_thread

        device_thread.install_check()  # TINYTITAN_DEVICE_CHECK: any MLX call off this thread raises
        device_thread.claim()
        error: BaseException = ShuttingDown()
        try:
            while self._take_commands():
                outputs = self._admit()
                batch = self.batch
                if batch is not None and batch.rows:
                    outputs += self._step(batch)
                _deliver(outputs)
                self._forget(outputs)
        except BaseException as exc:  # a bug here must not leave requests waiting forever
            log.exception("the device worker failed")
            error = exc if isinstance(exc, TinyTitanError) else GenerationFailed()
            raise
        finally:
            self._shut(error)
            device_thread.release()  # MLX's streams end with this thread (else exit may abort)

    def _take_commands(self) -> bool:
        """Wait for work (as long as the batch allows), then apply every queued command; False to stop."""
        batch = self.batch
        wait = batch.wake_in() if batch is not None else None
        if self._pending and self._admissible():
            wait = 0.0
        if wait == 0.0 and batch is not None and batch.rows and self._commands.empty():
            return True  # the common step: rows to step, nothing sent (no exception raised for it)
        try:
            command = self._commands.get(timeout=wait) if wait is None or wait > 0 else self._commands.get_nowait()
        except queue.Empty:
            if batch is not None and not batch.rows:
                batch.idle()
            return True
        while True:
            if command is _CLOSE:
                return False
            self._apply(command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, command: Any) -> None:
        if isinstance(command, (Row, _Barrier)):
            with self._lock:
                self._pending.append(command)
            return
        _kind, row = command
        with self._lock:
            if row in self._pending:
                self._pending.remove(row)
                row.ended = True
                return
            active = self._active.pop(row.id, None)
        if active is not None and self.batch is not None:
            self.batch.remove(active)
            active.ended = True

    def _admissible(self) -> bool:
        """Whether the first pending item could be taken now."""
        head = self._pending[0]
        target = head.model_id
        if isinstance(head, _Barrier) or target != self.resident or self.batch is None:
            return not self._active
        return self.batch.rows < self.batch.max_rows

    def _admit(self) -> list[Output]:
        outputs: list[Output] = []
        while self._pending and self._admissible():
            with self._lock:
                head = self._pending.popleft()
            if isinstance(head, _Barrier):
                self._barrier(head)
                continue
            try:
                batch = self._ready(head.model_id)
            except BaseException as exc:
                outputs.append(Output(head, error=_as_error(exc, head.model_id)))
                continue
            with self._lock:
                self._active[head.id] = head
            try:
                outputs += batch.add(head)
            except TinyTitanError as exc:
                outputs.append(Output(head, error=exc))
            except Exception:
                log.exception("a generation could not start")
                outputs.append(Output(head, error=GenerationFailed()))
        return outputs

    def _step(self, batch: Batch) -> list[Output]:
        self.steps += 1
        try:
            return batch.step()
        except Exception as exc:  # the batch itself failed: its rows end, the next row starts afresh
            log.exception("the batch failed")
            error = exc if isinstance(exc, TinyTitanError) else GenerationFailed()
            self.batch = None
            with self._lock:
                rows = list(self._active.values())
            _close_quietly(batch)
            return fail_rows(rows, error)

    def _forget(self, outputs: Sequence[Output]) -> None:
        ended = [o.row for o in outputs if o.last]
        if not ended:
            return
        with self._lock:
            for row in ended:
                row.ended = True
                self._active.pop(row.id, None)

    def _barrier(self, barrier: _Barrier) -> None:
        if barrier.call is not None:  # ``run(fn)``: fn's own result or exception, unchanged
            try:
                result: Any = barrier.call()
            except BaseException as exc:
                barrier.done.set_exception(exc)
                return
            barrier.done.set_result(result)
            return
        try:
            if barrier.model_id is None:
                result = self._unload()
            else:
                self._ready(barrier.model_id)
                result = self._backend_of(barrier.model_id)
        except BaseException as exc:
            barrier.done.set_exception(_as_error(exc, barrier.model_id))
            return
        barrier.done.set_result(result)

    def _ready(self, model_id: str) -> Batch:
        """``model_id`` resident with an open batch (switching models when another is resident)."""
        backend = self._backend_of(model_id)
        if self.resident != model_id or not backend.loaded:
            self._switch(model_id, backend)
        if self.batch is None:
            self.batch = backend.open_batch()
        return self.batch

    def _switch(self, model_id: str, backend: Resident) -> None:
        previous = self.resident
        started = time.perf_counter()
        if self.batch is not None:
            _close_quietly(self.batch)
            self.batch = None
        if previous is not None and previous != model_id:
            self.resident = None
            self._backend_of(previous).unload(keep_prompt_cache=True)
        unloaded = time.perf_counter()
        backend.load()
        loaded = time.perf_counter()
        self.resident = model_id
        if previous is not None and previous != model_id:
            switch = Switch(previous, model_id, unloaded - started, loaded - unloaded)
            self.switches.append(switch)
            log.info(
                "switched model %s -> %s in %.2f s (unload %.2f s, load %.2f s)",
                previous,
                model_id,
                switch.unload_s + switch.load_s,
                switch.unload_s,
                switch.load_s,
            )
        elif self._log_loads:
            log.info("loaded model %s in %.2f s", model_id, loaded - unloaded)

    def _unload(self) -> bool:
        if self.batch is not None:
            _close_quietly(self.batch)
            self.batch = None
        model_id, self.resident = self.resident, None
        return model_id is not None and self._backend_of(model_id).unload()

    def _shut(self, error: BaseException) -> None:
        with self._lock:
            self._closed = True
            rows = [r for r in self._pending if isinstance(r, Row)] + list(self._active.values())
            barriers = [b for b in self._pending if isinstance(b, _Barrier)]
            self._pending.clear()
            self._active.clear()
        while True:  # commands sent after the last look
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(command, Row):
                rows.append(command)
            elif isinstance(command, _Barrier):
                barriers.append(command)
        _deliver(fail_rows(rows, error))
        for barrier in barriers:
            barrier.done.set_exception(error)
        batch, self.batch = self.batch, None
        if batch is not None:
            try:
                batch.shutdown()
            except Exception:
                log.exception("shutting the batch down failed")


def _as_error(exc: BaseException, model_id: str | None) -> BaseException:
    if isinstance(exc, TinyTitanError):
        return exc
    log.error("loading model %s failed: %s", model_id, exc, exc_info=not isinstance(exc, (OSError, ValueError)))
    return GenerationFailed(f"loading model {model_id} failed: {exc}")


def _close_quietly(batch: Batch) -> None:
    try:
        batch.close()
    except Exception:
        log.exception("closing the batch failed")


_MAIL = Mailboxes()


def _deliver(outputs: Sequence[Output]) -> None:
    """To each event loop, every output of this step, in order (one wake-up while it lags: mailbox.py)."""
    if outputs:
        _MAIL.deliver(outputs)
