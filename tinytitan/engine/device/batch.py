"""What the device worker drives: a ``Row`` per generation and the resident model's ``Batch``.

A backend opens a ``Batch`` on the device thread once its weights are in. The worker adds rows to
it, removes the rows that are cancelled, and calls ``step`` while any row runs; each step returns
one ``Output`` per row that produced something (new tokens, an end, or an error). A row ends in
the batch itself — end of turn, its output cap (``length``, decided only here), a failure — and the
batch stores its KV state in the prompt cache before reporting the end. Every method runs on the
device thread.
"""

from __future__ import annotations

import asyncio
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tinytitan.engine.request import ValidatedRequest

__all__ = ["Batch", "Output", "Resident", "Row", "fail_rows"]

_ids = itertools.count(1)


@dataclass(eq=False)
class Row:
    """One generation as the device sees it. ``deliver`` runs on ``loop`` (the Job's)."""

    model_id: str
    request: ValidatedRequest
    prompt: Any  # the backend's Prompt: text, n_tokens, tokens
    max_new: int
    deliver: Callable[[Output], None]
    loop: asyncio.AbstractEventLoop
    id: int = field(default_factory=lambda: next(_ids))
    ended: bool = False  # the device let the row go (set on the device thread)
    # its client has gone: set once, False → True, by ``DeviceWorker.cancel`` on any thread, and read
    # on the device thread between two layers of a prefill chunk (a plain attribute: one atomic
    # store and load; a stale read costs one more layer)
    cancelled: bool = False

    @property
    def tokens(self) -> Sequence[Any]:
        return self.prompt.tokens or ()


@dataclass(slots=True)
class Output:
    """What one step gave one row: ``tokens`` (ids for a model, text pieces for the stub), then
    ``finish`` on its last output, or ``error``. ``cached`` (first output only) is the prompt-cache hit."""

    row: Row
    tokens: list[Any] = field(default_factory=list)
    finish: str | None = None
    error: BaseException | None = None
    cached: int | None = None

    @property
    def last(self) -> bool:
        return self.finish is not None or self.error is not None


class Batch(ABC):
    """The resident model's rows, stepped together."""

    max_rows: int = 1

    @abstractmethod
    def add(self, row: Row) -> list[Output]:
        """Take ``row`` (prompt-cache fetch, sampler, grammar mask); may end it at once (an error)."""

    @abstractmethod
    def remove(self, row: Row) -> None:
        """Drop a cancelled row before the next step (its KV state stored when it is whole)."""

    @abstractmethod
    def step(self) -> list[Output]:
        """One step for every row (a prefill chunk of a newcomer, one decode for the others)."""

    @property
    @abstractmethod
    def rows(self) -> int:
        """Rows in the batch now."""

    def wake_in(self) -> float | None:
        """Seconds until the batch has work to do (None: only when a row comes; 0: now)."""
        return 0.0 if self.rows else None

    def idle(self) -> None:  # noqa: B027 - optional hook
        """``wake_in`` passed with no row to step (rank 0 of a group sends its heartbeat)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The batch ends (unload, a model switch): release its state."""

    def shutdown(self) -> None:
        """The device worker stops for good (rank 0 of a group tells the others)."""
        self.close()


class Resident(Protocol):
    """What the device worker asks of a model it makes resident (``models.base.Backend`` is one)."""

    @property
    def loaded(self) -> bool: ...

    def load(self) -> None: ...

    def unload(self, *, keep_prompt_cache: bool = False) -> bool: ...

    def open_batch(self) -> Batch: ...


def fail_rows(rows: Sequence[Row], error: BaseException) -> list[Output]:
    return [Output(row, error=error) for row in rows]
