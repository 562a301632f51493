"""The products' threads on a busy machine (issue 43): every core while the others leave them free,
fewer at once when other processes take some, back after a calm spell."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tinytitan import cpu_blas, cpu_share
from tinytitan.cpu_share import CALM_TICKS, CpuShare, Sample, parse_stat, threads_for

STAT = """cpu  1000 50 200 5000 30 0 10 40 7 0
cpu0 500 25 100 2500 15 0 5 20 7 0
intr 12345
"""


def test_busy_time_from_proc_stat() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    # user + nice + system + irq + softirq + steal; idle and iowait are not busy, guest is in user
    assert parse_stat(STAT.splitlines()) == pytest.approx((1000 + 50 + 200 + 0 + 10 + 40) / tick)
    assert parse_stat(["intr 1 2 3"]) is None


def test_busy_time_of_the_cores_we_may_use() -> None:
    """A process pinned to some cores (taskset, a container's cpuset) counts the others' work there only."""
    tick = os.sysconf("SC_CLK_TCK")
    assert parse_stat(STAT.splitlines(), {0}) == pytest.approx((500 + 25 + 100 + 5 + 20) / tick)
    assert parse_stat(STAT.splitlines(), {1}) is None  # no line for it: nothing to go by


def test_a_real_sample_where_linux_has_one() -> None:
    sample = cpu_share.read_sample()
    if not os.path.exists("/proc/stat"):
        assert sample is None
        return
    assert sample is not None and sample.busy > 0 and sample.own > 0


@pytest.mark.parametrize(
    ("others", "most", "threads"),
    [
        (0.0, 2, 2),
        (0.2, 2, 2),
        (0.3, 2, 1),
        (1.0, 2, 1),
        (1.9, 2, 1),
        (0.0, 8, 8),
        (1.0, 8, 7),
        (2.5, 8, 5),
        (40, 8, 1),
    ],
)
def test_threads_for_what_the_others_take(others: float, most: int, threads: int) -> None:
    assert threads_for(others, most) == threads


class Machine:
    """Scripted looks at a machine: each tick, the others take ``others`` cores and we take ``own``."""

    def __init__(self) -> None:
        self.now = Sample(0.0, 0.0, 0.0)
        self.others = 0.0
        self.own = 2.0
        self.readable = True

    def sample(self) -> Sample | None:
        if not self.readable:
            return None
        tick = 0.2
        self.now = Sample(
            self.now.wall + tick, self.now.busy + (self.others + self.own) * tick, self.now.own + self.own * tick
        )
        return self.now


@pytest.fixture
def machine() -> Machine:
    return Machine()


def watching(machine: Machine, most: int = 2) -> tuple[CpuShare, list[int]]:
    applied: list[int] = []
    return CpuShare(most, applied.append, machine.sample), applied


def test_a_quiet_machine_keeps_every_core(machine: Machine) -> None:
    share, applied = watching(machine)
    for _ in range(10):
        assert share.update() == 2
    assert applied == [] and share.others == pytest.approx(0.0)


def test_drops_at_once_when_another_process_runs_and_climbs_back_after_a_calm_spell(machine: Machine) -> None:
    share, applied = watching(machine)
    share.update()
    share.update()
    machine.others, machine.own = 1.0, 1.0  # a hog takes a core
    assert share.update() == 1  # the first look that sees it
    assert applied == [1]
    for _ in range(5):
        assert share.update() == 1  # it stays while the hog runs: one thread leaves it its core
    machine.others, machine.own = 0.0, 1.0  # the hog ends; our one thread leaves a core idle
    seen = [share.update() for _ in range(CALM_TICKS + 3)]
    assert seen[0] == 1 and seen[-1] == 2  # not at the first calm look, but back before long
    assert applied == [1, 2]


def test_a_blip_does_not_bring_every_core_back(machine: Machine) -> None:
    share, applied = watching(machine)
    share.update()
    machine.others, machine.own = 1.0, 1.0
    share.update()
    share.update()
    machine.others = 0.0
    share.update()  # one calm look (averaged with the busy one before it)
    machine.others = 1.0
    for _ in range(CALM_TICKS + 2):
        share.update()
    assert applied == [1]


def test_our_own_threads_are_not_the_others(machine: Machine) -> None:
    share, applied = watching(machine, most=4)
    machine.own = 4.0  # every core busy, all of it ours
    for _ in range(5):
        share.update()
    assert share.threads == 4 and applied == []


def test_nothing_changes_without_proc_stat(machine: Machine) -> None:
    machine.readable = False
    share, applied = watching(machine)
    assert share.update() == 2 and applied == []


@pytest.fixture
def no_watch() -> Iterator[None]:
    cpu_share.stop()
    yield
    cpu_share.stop()


class Library:
    """A BLAS's thread count behind ``thread_control``'s get and set."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.set_to: list[int] = []

    def control(self) -> tuple[object, object]:
        def set_(n: int) -> None:
            self.count = n
            self.set_to.append(n)

        return (lambda: self.count), set_


@pytest.mark.usefixtures("no_watch")
def test_start_watches_the_preloaded_library_and_stop_gives_its_count_back(
    monkeypatch: pytest.MonkeyPatch, machine: Machine
) -> None:
    library = Library(2)
    monkeypatch.setattr(cpu_blas, "thread_control", library.control)
    monkeypatch.setattr(cpu_share, "read_sample", machine.sample)
    monkeypatch.delenv(cpu_share.OFF_ENV, raising=False)
    machine.others, machine.own = 1.0, 1.0
    share = cpu_share.start()
    assert share is not None and cpu_share.start() is share  # once per process
    share.update()
    assert library.count == 1 and cpu_share.threads(2) == 1 and cpu_share.threads(4) == 1
    assert cpu_share.most() == 2  # what the banner names: the count a quiet machine gets
    cpu_share.stop()
    assert library.count == 2 and cpu_share.threads(2) == 2 and cpu_share.most() is None


@pytest.mark.usefixtures("no_watch")
@pytest.mark.parametrize("why", ["off", "no library", "one thread"])
def test_start_does_nothing_when_there_is_nothing_to_adapt(
    monkeypatch: pytest.MonkeyPatch, machine: Machine, why: str
) -> None:
    library = Library(1 if why == "one thread" else 2)
    monkeypatch.setattr(cpu_blas, "thread_control", (lambda: None) if why == "no library" else library.control)
    monkeypatch.setattr(cpu_share, "read_sample", machine.sample)
    if why == "off":
        monkeypatch.setenv(cpu_share.OFF_ENV, "off")
    else:
        monkeypatch.delenv(cpu_share.OFF_ENV, raising=False)
    assert cpu_share.start() is None
    assert cpu_share.threads(2) == 2 and library.set_to == []


@pytest.mark.usefixtures("no_watch")
def test_the_count_holds_still_in_a_steady_block(monkeypatch: pytest.MonkeyPatch, machine: Machine) -> None:
    """Code that limits every BLAS for a while and restores what it found (the attention) holds
    ``steady()``: the watch's change waits for the end of the block."""
    library = Library(2)
    share = CpuShare(2, library.control()[1], machine.sample)  # type: ignore[arg-type]
    monkeypatch.setattr(cpu_share, "_share", share)
    share.update()
    machine.others, machine.own = 1.0, 1.0
    with cpu_share.steady():
        looker = threading.Thread(target=share.update)
        looker.start()
        looker.join(0.2)
        assert library.set_to == []  # blocked, however long it waited
    looker.join()
    assert library.set_to == [1]
    assert cpu_share.steady() is share.lock
    monkeypatch.setattr(cpu_share, "_share", None)


BLIS = cpu_blas.find_blis()


@pytest.mark.skipif(BLIS is None, reason="libblis4-pthread is not installed")
def test_thread_control_of_a_preloaded_blis() -> None:
    code = "from tinytitan import cpu_blas; get, set_ = cpu_blas.thread_control(); print(get()); set_(1); print(get())"
    env = {**os.environ, "LD_PRELOAD": str(BLIS), "BLIS_NUM_THREADS": "3"}
    env.pop("BLIS_ARCH_TYPE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["3", "1"]


def test_no_thread_control_without_a_preloaded_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_blas, "_mapped", lambda: None)
    assert cpu_blas.thread_control() is None
