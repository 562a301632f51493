"""The device worker: one thread, rows in arrival order across models, switches between rows,
cancels within a step, and a failed load or batch that fails only what it must."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.device.worker import DeviceWorker
from tinytitan.engine.errors import GenerationFailed, ShuttingDown
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import ChatRequest, Message, ModelInfo, ValidatedRequest
from tinytitan.engine.request.validate import validate
from tinytitan.testing.lifecycle import Recorder
from tinytitan.testing.waiting import wait_until


class Inbox:
    """Stands in for an event loop: what the worker hands over, in order, with the thread it ran on."""

    def __init__(self) -> None:
        self.items: queue.SimpleQueue[Output] = queue.SimpleQueue()
        self.hops = 0  # hand-offs (one per step and loop)

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        self.hops += 1
        fn(*args)

    def next(self, timeout: float = 20) -> Output:
        return self.items.get(timeout=timeout)


class Held(Batch):
    """Rows produce a token per step and end only when the test says (``release``)."""

    max_rows = 2

    def __init__(self, log: list[str], model_id: str) -> None:
        self.log, self.model_id = log, model_id
        self.running: dict[int, Row] = {}
        self.released: set[int] = set()
        self.lock = threading.Lock()

    @property
    def rows(self) -> int:
        return len(self.running)

    def add(self, row: Row) -> list[Output]:
        self.running[row.id] = row
        self.log.append(f"run {row.request.request_id}")
        return [Output(row, cached=0)]

    def remove(self, row: Row) -> None:
        del self.running[row.id]
        self.log.append(f"cancel {row.request.request_id}")

    def step(self) -> list[Output]:
        outputs = []
        for row in list(self.running.values()):
            with self.lock:
                done = row.id in self.released
            if done:
                del self.running[row.id]
            outputs.append(Output(row, ["x"], finish="stop" if done else None))
        return outputs

    def release(self, row: Row) -> None:
        with self.lock:
            self.released.add(row.id)


class Model(Recorder):
    def __init__(self, model_id: str, log: list[str], **kw: Any) -> None:
        super().__init__(model_id, log, **kw)
        self.batch: Held | None = None

    def open_batch(self) -> Batch:
        self.batch = Held(self.log, self.model_id)
        return self.batch


def request(model_id: str, name: str) -> ValidatedRequest:
    chat = ChatRequest(model=model_id, messages=(Message("user", name),), request_id=name)
    return validate(chat, ModelInfo(model_id, 1000))


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def models(log: list[str]) -> dict[str, Model]:
    return {name: Model(name, log) for name in ("a", "b")}


@pytest.fixture
def worker(models: dict[str, Model]) -> Iterator[DeviceWorker]:
    worker = DeviceWorker(models.__getitem__)
    yield worker
    worker.close()
    assert worker.join(10)


def submit(worker: DeviceWorker, inbox: Inbox, model_id: str, name: str) -> Row:
    row = Row(model_id, request(model_id, name), Prompt("", 0, tokens=[]), 100, inbox.items.put, inbox)  # type: ignore[arg-type]
    worker.submit(row)
    return row


def until_ended(inbox: Inbox, row: Row) -> list[Output]:
    seen: list[Output] = []
    while True:
        out = inbox.next()
        seen.append(out)
        if out.row is row and out.last:
            return seen


def test_rows_of_the_resident_model_run_together(
    worker: DeviceWorker, models: dict[str, Model], log: list[str]
) -> None:
    inbox = Inbox()
    a1, a2 = submit(worker, inbox, "a", "a1"), submit(worker, inbox, "a", "a2")
    wait_until(lambda: log == ["load a", "run a1", "run a2"], what="both rows run")
    batch = models["a"].batch
    assert batch is not None and batch.rows == 2  # the same model: no waiting for the first
    batch.release(a1)
    batch.release(a2)
    until_ended(inbox, a1)
    assert worker.switches == [] and worker.thread is not None and worker.thread.name == "tinytitan-device"


def test_a_switch_waits_for_running_rows_and_later_arrivals_wait_behind_it(
    worker: DeviceWorker, models: dict[str, Model], log: list[str]
) -> None:
    inbox = Inbox()
    a1 = submit(worker, inbox, "a", "a1")
    wait_until(lambda: log == ["load a", "run a1"], what="a1 runs")
    b = submit(worker, inbox, "b", "b")
    a2 = submit(worker, inbox, "a", "a2")  # names the resident model, but arrived after the switch to b
    steps = worker.steps
    wait_until(lambda: worker.steps > steps + 3, what="a few steps of a1")
    assert log == ["load a", "run a1"]  # a is not unloaded under a running row, and a2 waits behind b
    models["a"].batch.release(a1)  # type: ignore[union-attr]
    until_ended(inbox, a1)
    wait_until(lambda: "run b" in log, what="b runs")
    assert "run a2" not in log
    models["b"].batch.release(b)  # type: ignore[union-attr]
    until_ended(inbox, b)
    wait_until(lambda: "run a2" in log, what="a2 runs")
    models["a"].batch.release(a2)  # type: ignore[union-attr]
    until_ended(inbox, a2)
    assert log == ["load a", "run a1", "unload a keep", "load b", "run b", "unload b keep", "load a", "run a2"]
    assert [(s.previous, s.current) for s in worker.switches] == [("a", "b"), ("b", "a")]
    assert worker.resident == "a"


def test_a_failed_load_fails_its_row_and_lets_the_next_one_through(log: list[str]) -> None:
    models = {"a": Model("a", log), "b": Model("b", log, fail_load=True)}
    worker = DeviceWorker(models.__getitem__)
    inbox = Inbox()
    try:
        assert worker.activate("a").result(10) is models["a"]
        b = submit(worker, inbox, "b", "b")
        out = inbox.next()
        assert out.row is b and isinstance(out.error, GenerationFailed) and "disk gone" in out.error.message
        assert worker.resident is None  # a was unloaded, b never loaded
        a = submit(worker, inbox, "a", "a")
        wait_until(lambda: models["a"].batch is not None and models["a"].batch.rows == 1, what="a runs")
        models["a"].batch.release(a)
        until_ended(inbox, a)
        assert log == ["load a", "unload a keep", "load a", "run a"]
    finally:
        worker.close()


def test_unload_waits_for_the_running_row(worker: DeviceWorker, models: dict[str, Model], log: list[str]) -> None:
    inbox = Inbox()
    a1 = submit(worker, inbox, "a", "a1")
    wait_until(lambda: log == ["load a", "run a1"], what="a1 runs")
    unloaded = worker.unload()
    steps = worker.steps
    wait_until(lambda: worker.steps > steps + 3, what="a few steps of a1")
    assert not unloaded.done() and log == ["load a", "run a1"]
    models["a"].batch.release(a1)  # type: ignore[union-attr]
    assert unloaded.result(10) is True
    assert log[-1] == "unload a" and worker.resident is None
    assert worker.unload().result(10) is False


def test_a_cancelled_row_leaves_within_one_step(worker: DeviceWorker, models: dict[str, Model], log: list[str]) -> None:
    inbox = Inbox()
    a1, a2 = submit(worker, inbox, "a", "a1"), submit(worker, inbox, "a", "a2")
    wait_until(lambda: log == ["load a", "run a1", "run a2"], what="both rows run")
    wait_until(lambda: worker.steps > 3, what="a few steps")
    worker.cancel(a1)
    at_cancel = worker.steps  # a step may be under way: its output for a1 is the last one
    wait_until(lambda: "cancel a1" in log, what="a1 leaves")
    wait_until(lambda: worker.steps >= at_cancel + 3, what="more steps")
    models["a"].batch.release(a2)  # type: ignore[union-attr]
    outputs = until_ended(inbox, a2)
    assert a1.ended and not any(o.last for o in outputs if o.row is a1)
    a1_steps = [o for o in outputs if o.row is a1 and o.tokens]
    a2_steps = [o for o in outputs if o.row is a2 and o.tokens]
    assert len(a2_steps) - len(a1_steps) >= 3  # a2 went on stepping; a1 stopped within one step of the cancel
    assert len(a1_steps) <= at_cancel + 1


def drained(inbox: Inbox) -> list[Output]:
    found = []
    while True:
        try:
            found.append(inbox.items.get_nowait())
        except queue.Empty:
            return found


def test_closing_fails_waiting_and_running_rows(models: dict[str, Model], log: list[str]) -> None:
    worker = DeviceWorker(models.__getitem__)
    inbox = Inbox()
    submit(worker, inbox, "a", "a")
    wait_until(lambda: "run a" in log, what="a runs")
    b = submit(worker, inbox, "b", "b")  # waits for a
    worker.close()
    assert worker.join(10)
    ends = {o.row.request.request_id: o for o in drained(inbox) if o.last}
    assert isinstance(ends["a"].error, ShuttingDown) and isinstance(ends["b"].error, ShuttingDown)
    late = submit(worker, inbox, "a", "late")
    assert isinstance(inbox.next().error, ShuttingDown) and late.request.request_id == "late"
    assert b.model_id == "b"
