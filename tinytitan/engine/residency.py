"""Which model's weights are loaded, and the gate a generation passes to use it (issue 15).

A generation runs inside ``Residency.use(model_id)``. Generations of the resident model pass
straight through (several may run at once where the engine runs several); one naming another model
waits until no generation uses the resident one, then the resident model is unloaded (its prompt
cache kept, so a switch back finds its prefixes warm), the named one loaded and the switch logged
with its timings. Callers pass in the order they reach the gate: a request behind a pending switch
waits for it even when it names the model still resident, so requests keep their arrival order
across models (the admission queue hands out slots in arrival order).

With one generation thread (one generation at a time) this is simply "switch before the next job".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tinytitan.engine.backends.base import Backend

__all__ = ["Residency", "Switch"]

log = logging.getLogger("tinytitan.models")


@dataclass(frozen=True, slots=True)
class Switch:
    """One change of resident model (kept for tests and benchmarks; also logged)."""

    previous: str | None
    current: str
    unload_s: float
    load_s: float


class Residency:
    def __init__(self, backend_of: Callable[[str], Backend], *, log_loads: bool) -> None:
        self._backend_of = backend_of  # builds the backend on first need (facts, no weights)
        self._log_loads = log_loads  # a catalog logs every load; one model says it at startup instead
        self.current: str | None = None  # the id made resident here (None: nothing, or unloaded)
        self.switches: list[Switch] = []
        self._cond = threading.Condition()
        self._users = 0  # generations using the resident model now
        self._turns: deque[object] = deque()  # callers waiting at the gate, in arrival order

    @contextmanager
    def use(self, model_id: str) -> Iterator[Backend]:
        """``model_id``'s backend, loaded and kept resident until the block ends."""
        turn = object()
        with self._cond:
            self._turns.append(turn)
            try:
                self._cond.wait_for(lambda: self._turns[0] is turn and (self._ready(model_id) or self._users == 0))
                backend = self._make_resident(model_id)
                self._users += 1
            finally:
                self._turns.remove(turn)
                self._cond.notify_all()
        try:
            yield backend
        finally:
            with self._cond:
                self._users -= 1
                self._cond.notify_all()

    def unload(self) -> bool:
        """Release the resident model (weights and prompt cache) once no generation uses it."""
        with self._cond:
            self._cond.wait_for(lambda: self._users == 0 and not self._turns)
            model_id, self.current = self.current, None
            return model_id is not None and self._backend_of(model_id).unload()

    def _ready(self, model_id: str) -> bool:
        return self.current == model_id and self._backend_of(model_id).loaded

    def _make_resident(self, model_id: str) -> Backend:
        """Unload the resident model if it is another and load ``model_id`` (no generation runs)."""
        backend = self._backend_of(model_id)
        previous = self.current
        if previous == model_id and backend.loaded:
            return backend
        started = time.perf_counter()
        if previous is not None and previous != model_id:
            self.current = None
            self._backend_of(previous).unload(keep_prompt_cache=True)
        unloaded = time.perf_counter()
        backend.load()
        loaded = time.perf_counter()
        self.current = model_id
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
        return backend
