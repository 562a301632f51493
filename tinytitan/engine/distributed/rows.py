"""A generation as the lockstep runner takes it (the shape of the batch runner's ``Row``)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinytitan.engine.request import Sampling

__all__ = ["END", "Row"]

END = object()  # the last item of a row's queue after a normal end


@dataclass(eq=False)
class Row:
    tokens: list[int]  # the whole prompt
    max_new: int
    sampling: Sampling
    cancel: threading.Event
    mask: Any = None  # a GrammarMask (built on the job thread), or None
    on_join: Callable[[int], None] | None = None  # told the reused prefix length before the first token
    out: queue.SimpleQueue[Any] = field(default_factory=queue.SimpleQueue)
    gone: threading.Event = field(default_factory=threading.Event)  # the reader stopped reading
    error: BaseException | None = None

    def leave(self) -> None:
        """The reader is done with this row (stop string, cap, client gone): free its slot."""
        self.gone.set()

    @property
    def leaving(self) -> bool:
        return self.gone.is_set() or self.cancel.is_set()
