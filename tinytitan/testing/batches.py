"""Driving a ``Batch`` by hand in the calling thread, as the device worker would (tests, benchmarks).

No worker thread and no event loop: rows are added, the batch is stepped until every row has ended,
and each step's outputs are yielded as they come.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import Sampling

__all__ = ["collect", "drive", "row"]


def row(prompt: Sequence[Any] | Prompt, max_new: int, sampling: Sampling | None = None, request: Any = None) -> Row:
    """A row of ``prompt`` (a rendered prompt, or token ids) whose outputs only ``drive`` reads."""
    request = request or SimpleNamespace(sampling=sampling or Sampling(temperature=0.0))
    if not isinstance(prompt, Prompt):
        prompt = Prompt("", len(prompt), list(prompt))
    return Row("bench", request, prompt, max_new, _nowhere, None)  # type: ignore[arg-type]


def drive(batch: Batch, rows: Sequence[Row]) -> Iterator[Output]:
    """Add ``rows`` and step ``batch`` until all have ended; every output, in order."""
    left = {r.id for r in rows}
    for r in rows:
        for output in batch.add(r):
            if output.last:
                left.discard(output.row.id)
            yield output
    while left:
        wait = batch.wake_in()
        if wait:
            time.sleep(wait)
        for output in batch.step():
            if output.last:
                left.discard(output.row.id)
            yield output


def collect(batch: Batch, rows: Sequence[Row]) -> list[list[Any]]:
    """The tokens each row produced (its error raised)."""
    tokens: dict[int, list[Any]] = {r.id: [] for r in rows}
    for output in drive(batch, rows):
        if output.error is not None:
            raise output.error
        tokens[output.row.id] += output.tokens
    return [tokens[r.id] for r in rows]


def _nowhere(_output: Output) -> None:
    raise AssertionError("a row driven by hand is delivered nowhere")
