"""Telling a generation that has fallen into a verbatim cycle (issue 26), from its text alone.

A small model asked for a long story can repeat one paragraph until its output cap, minutes later.
``CycleDetector`` is fed the text as it streams and fires once the text's tail is one block of text
repeated: one block seen ``repeats`` times in a row (by default 3), the repeating stretch at least
``min_span`` characters long (a long window, so a list of short items,
an ASCII rule or a refrain does not count). It works on text — what the chat and the server's own
passes see — checks every ``every`` characters, and looks back at most ``window`` characters
(so a block longer than ``window / repeats`` is not seen; a Z-array over the reversed tail finds
every period at once, about a millisecond for the default window).

Pure and synchronous: the terminal chat, compaction and (wired by ``Job``) the HTTP API use it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Cycle", "CycleDetector", "find_cycle"]


@dataclass(frozen=True, slots=True)
class Cycle:
    """A verbatim cycle at the end of a text: ``period`` characters repeated over ``span`` of them."""

    period: int
    span: int
    unit: str  # one copy of the repeating text (its latest)

    @property
    def repeats(self) -> float:
        return self.span / self.period


def _z_array(s: str) -> list[int]:
    """z[i]: the length of the longest common prefix of ``s`` and ``s[i:]`` (z[0] = len(s))."""
    n = len(s)
    z = [0] * n
    if n:
        z[0] = n
    left = right = 0
    for i in range(1, n):
        k = min(right - i, z[i - left]) if i < right else 0
        while i + k < n and s[k] == s[i + k]:
            k += 1
        z[i] = k
        if i + k > right:
            left, right = i, i + k
    return z


def find_cycle(text: str, *, min_span: int = 600, repeats: int = 3) -> Cycle | None:
    """The shortest period the end of ``text`` repeats with, if its cycle is long enough; else None.

    The tail has period p over ``z[p] + p`` characters of the reversed text; it counts when that is at
    least ``min_span`` and ``repeats`` periods.
    """
    reverse = text[::-1]
    z = _z_array(reverse)
    for period in range(1, len(reverse) // repeats + 1):
        span = z[period] + period
        if span >= min_span and span >= repeats * period:
            return Cycle(period, span, text[len(text) - period :])
    return None


class CycleDetector:
    """Fed a generation's text piece by piece; ``feed`` returns the ``Cycle`` once it has one.

    After it fired, ``cycle`` keeps it (and ``feed`` returns it again): the caller stops the
    generation. Only the last ``window`` characters are kept.
    """

    def __init__(self, *, min_span: int = 600, repeats: int = 3, window: int = 6000, every: int = 64) -> None:
        if min_span < 1 or repeats < 2 or window < min_span or every < 1:
            raise ValueError("need min_span >= 1, repeats >= 2, window >= min_span, every >= 1")
        self.min_span = min_span
        self.repeats = repeats
        self.window = window
        self.every = every
        self.fed = 0  # characters fed in all
        self._tail = ""
        self._checked = 0  # ``fed`` at the last check
        self.cycle: Cycle | None = None

    def feed(self, piece: str) -> Cycle | None:
        if self.cycle is not None or not piece:
            return self.cycle
        self.fed += len(piece)
        self._tail = (self._tail + piece)[-self.window :]
        if self.fed < self.min_span or self.fed - self._checked < self.every:
            return None
        self._checked = self.fed
        self.cycle = find_cycle(self._tail, min_span=self.min_span, repeats=self.repeats)
        return self.cycle
