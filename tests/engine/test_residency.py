"""The residency gate: a switch waits for the other model's generations, callers keep arrival order."""

from __future__ import annotations

import threading

import pytest

from tinytitan.engine.residency import Residency
from tinytitan.testing.lifecycle import Recorder
from tinytitan.testing.waiting import wait_until


@pytest.fixture
def log() -> list[str]:
    return []


@pytest.fixture
def gate(log: list[str]) -> Residency:
    backends = {name: Recorder(name, log) for name in ("a", "b")}
    return Residency(backends.__getitem__, log_loads=True)


class Generation(threading.Thread):
    """A generation holding ``model_id`` resident until released."""

    def __init__(self, gate: Residency, model_id: str, name: str, log: list[str]) -> None:
        super().__init__(daemon=True)
        self.gate, self.model_id, self.label, self.log = gate, model_id, name, log
        self.entered = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        with self.gate.use(self.model_id) as backend:
            assert backend.info.id == self.model_id and backend.loaded
            self.log.append(f"run {self.label}")
            self.entered.set()
            self.release.wait(30)


def waiting(gate: Residency) -> int:
    with gate._cond:
        return len(gate._turns)


def test_generations_of_the_resident_model_run_together(gate: Residency, log: list[str]) -> None:
    first, second = Generation(gate, "a", "a1", log), Generation(gate, "a", "a2", log)
    first.start()
    assert first.entered.wait(20)
    second.start()
    assert second.entered.wait(20)  # the same model: no switch, no waiting for the first
    for thread in (first, second):
        thread.release.set()
        thread.join(20)
    assert log == ["load a", "run a1", "run a2"] and gate.switches == []


def test_a_switch_waits_for_in_flight_generations_and_later_arrivals_wait_behind_it(
    gate: Residency, log: list[str]
) -> None:
    a1, b, a2 = Generation(gate, "a", "a1", log), Generation(gate, "b", "b", log), Generation(gate, "a", "a2", log)
    a1.start()
    assert a1.entered.wait(20)
    b.start()
    wait_until(lambda: waiting(gate) == 1, what="b waits at the gate")
    a2.start()  # names the resident model, but arrived after the switch to b
    wait_until(lambda: waiting(gate) == 2 or a2.entered.is_set(), what="a2 reaches the gate")
    assert not b.entered.is_set() and not a2.entered.is_set()
    assert log == ["load a", "run a1"]  # a is not unloaded under a running generation
    a1.release.set()
    assert b.entered.wait(20)
    assert not a2.entered.is_set()
    b.release.set()
    assert a2.entered.wait(20)
    a2.release.set()
    for thread in (a1, b, a2):
        thread.join(20)
    assert log == ["load a", "run a1", "unload a keep", "load b", "run b", "unload b keep", "load a", "run a2"]
    assert [(s.previous, s.current) for s in gate.switches] == [("a", "b"), ("b", "a")]
    assert gate.current == "a"


def test_a_failed_load_fails_its_caller_and_lets_the_next_one_through(log: list[str]) -> None:
    backends = {"a": Recorder("a", log), "b": Recorder("b", log, fail_load=True)}
    gate = Residency(backends.__getitem__, log_loads=True)
    with gate.use("a"):
        pass
    with pytest.raises(RuntimeError, match="disk gone"), gate.use("b"):
        pass
    assert gate.current is None  # a was unloaded, b never loaded
    with gate.use("a") as backend:
        assert backend.loaded
    assert log == ["load a", "unload a keep", "load a"]


def test_unload_waits_for_the_generation_using_the_model(gate: Residency, log: list[str]) -> None:
    running = Generation(gate, "a", "a1", log)
    running.start()
    assert running.entered.wait(20)
    done = threading.Event()
    result: list[bool] = []

    def unload() -> None:
        result.append(gate.unload())
        done.set()

    unloader = threading.Thread(target=unload, daemon=True)
    unloader.start()
    assert not done.wait(0.2) and log == ["load a", "run a1"]
    running.release.set()
    assert done.wait(20) and result == [True]
    assert log[-1] == "unload a" and gate.current is None
    assert gate.unload() is False
