"""The way outputs reach their event loops (``device/mailbox.py``): one wake-up per loop while it has
not read what came before, every output read in order, a closed loop let go. Driven on a loop that
records what it is asked to run (the test runs each callback itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinytitan.engine.device.batch import Output, Row
from tinytitan.engine.device.mailbox import Mailboxes


class Loop:
    """The call the mailboxes make on a loop, recorded for the test to run."""

    def __init__(self) -> None:
        self.soon: list[Callable[[], Any]] = []
        self.closed = False

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.soon.append(lambda: fn(*args))

    def run(self) -> None:
        calls, self.soon = self.soon, []
        for call in calls:
            call()


def rows(loop: Loop, n: int, seen: list[tuple[int, list[Any]]]) -> list[Row]:
    def row() -> Row:
        made = Row("m", None, None, 8, lambda out: seen.append((made.id, out.tokens)), loop)  # type: ignore[arg-type]
        return made

    return [row() for _ in range(n)]


def test_an_output_wakes_its_loop_which_reads_it() -> None:
    loop = Loop()
    seen: list[tuple[int, list[Any]]] = []
    (a,) = rows(loop, 1, seen)
    mail = Mailboxes()
    mail.deliver([Output(a, ["x"])])
    assert len(loop.soon) == 1 and not seen
    loop.run()
    assert seen == [(a.id, ["x"])]


def test_a_loop_that_lags_is_woken_once_and_reads_every_output_in_order() -> None:
    loop = Loop()
    seen: list[tuple[int, list[Any]]] = []
    a, b = rows(loop, 2, seen)
    mail = Mailboxes()
    mail.deliver([Output(a, ["1"])])
    mail.deliver([Output(a, ["2"]), Output(b, ["p"])])
    mail.deliver([Output(a, ["3"])])
    assert len(loop.soon) == 1
    loop.run()
    assert seen == [(a.id, ["1"]), (a.id, ["2"]), (b.id, ["p"]), (a.id, ["3"])]
    mail.deliver([Output(a, ["4"])])  # read: the next output wakes it again
    assert len(loop.soon) == 1


def test_each_loop_has_a_box_of_its_own() -> None:
    one, two = Loop(), Loop()
    seen: list[tuple[int, list[Any]]] = []
    (a,) = rows(one, 1, seen)
    (b,) = rows(two, 1, seen)
    mail = Mailboxes()
    mail.deliver([Output(a, ["1"]), Output(b, ["p"])])
    assert len(one.soon) == 1 and len(two.soon) == 1
    two.run()
    assert seen == [(b.id, ["p"])]


def test_a_closed_loop_is_let_go() -> None:
    loop = Loop()
    seen: list[tuple[int, list[Any]]] = []
    (a,) = rows(loop, 1, seen)
    loop.closed = True
    mail = Mailboxes()
    mail.deliver([Output(a, ["1"])])
    loop.closed = False
    mail.deliver([Output(a, ["2"])])  # a new box: the closed loop's was dropped
    loop.run()
    assert seen == [(a.id, ["2"])]
