"""Serving one model across several machines with ``mlx.distributed`` (issue #19).

``tinytitan serve`` started by ``mlx.launch`` finds its group (``group.detect``), loads its shard
(``shard.load_sharded``: mlx-lm's tensor or pipeline split) and then splits by rank:

- rank 0 serves HTTP exactly as one machine does — queue, validation, rendering, prompt-cache
  decisions, sampling, grammar masks, stop strings — and its device worker steps the
  ``LockstepBatch``, which broadcasts each step (``channel``) so the other ranks compute the same thing;
- ranks > 0 serve no HTTP: ``follower.follow`` replays the steps until rank 0 shuts down.

``Distributed`` is the seam the mlx backend uses: ``load`` (this rank's shard), ``start_leader`` /
``follow``, ``check`` (refuse requests once the group is lost). Liveness (``liveness``): every
collective has a deadline; a lost rank fails the running requests with ``GroupLost`` (503 in each
protocol's envelope, an error frame on a stream), and the process exits with status 75 so the
launcher can restart the group.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinytitan.engine.device.distributed.channel import Channel, GroupLost
from tinytitan.engine.device.distributed.group import PARALLELISMS, DistributedError, Group, detect
from tinytitan.engine.device.distributed.liveness import EXIT_GROUP_LOST, Watchdog, exit_now
from tinytitan.engine.device.distributed.lockstep import CacheOps

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed.leader import LockstepBatch

__all__ = [
    "DEFAULT_TIMEOUT",
    "EXIT_GROUP_LOST",
    "PARALLELISMS",
    "Distributed",
    "DistributedError",
    "GroupLost",
    "detect",
]

log = logging.getLogger("tinytitan.distributed")

DEFAULT_TIMEOUT = 60.0  # seconds a step (or an idle follower's wait for a heartbeat) may take
EXIT_GRACE = 2.0  # seconds rank 0 leaves for error frames to reach the clients before it exits


class Distributed:
    """This process's part in a distributed group (``group.size > 1``)."""

    def __init__(self, group: Group, parallel: str = "auto", timeout: float = DEFAULT_TIMEOUT) -> None:
        if parallel not in PARALLELISMS:
            raise DistributedError(f"--parallel takes {', '.join(PARALLELISMS)}, not {parallel!r}")
        if timeout <= 0:
            raise DistributedError("--distributed-timeout must be a positive number of seconds")
        self.group = group
        self.requested = parallel
        self.parallel: str | None = None  # decided at load
        self.timeout = timeout
        self.runner: LockstepBatch | None = None
        self.lost: GroupLost | None = None
        self._exit: Callable[[int], None] = exit_now
        self._lost_lock = threading.Lock()
        self.watchdog = Watchdog(timeout, self._expired)
        self.channel = Channel(group, self.watchdog)

    @property
    def rank(self) -> int:
        return self.group.rank

    @property
    def shard_name(self) -> str:
        """This rank's part of the model, for prompt-cache keys: e.g. ``tensor 0/2``."""
        return f"{self.parallel or self.requested} {self.rank}/{self.group.size}"

    def describe(self) -> str:
        """The banner's line: ranks, backend, parallelism."""
        parallel = self.parallel or (self.requested if self.requested != "auto" else "auto")
        return (
            f"distributed: rank {self.rank} of {self.group.size} over {self.group.backend}, {parallel} parallel; "
            f"a rank silent for {self.timeout:g} s stops the group"
        )

    # -- loading ----------------------------------------------------------------------------------
    def plan(self, config: dict[str, Any]) -> str:
        """Choose the parallelism from the architecture (no weights read); raises ``DistributedError``."""
        from tinytitan.engine.device.distributed.shard import parallelism_for

        self.parallel = parallelism_for(config, self.requested, self.group.size)
        return self.parallel

    def load(self, path: Path, dtype: str) -> Any:
        from tinytitan.engine.device.distributed.shard import load_sharded

        if self.parallel is None:
            self.plan(json.loads((path / "config.json").read_text(encoding="utf-8")))
        assert self.parallel is not None
        return load_sharded(path, dtype, self.group, self.parallel)

    def shutdown(self) -> None:
        """Rank 0 is stopping (its device worker told the followers, who exit 0): stop watching."""
        self.runner = None
        self.watchdog.close()

    # -- rank 0 -----------------------------------------------------------------------------------
    def start_leader(self, model: Any, cache: CacheOps, eos: Sequence[int]) -> LockstepBatch:
        """Rank 0: the batch that generates and drives every rank, heartbeats four per timeout."""
        from tinytitan.engine.device.distributed.leader import LockstepBatch

        self.runner = LockstepBatch(model, self.channel, cache, eos, heartbeat=self.timeout / 4, on_lost=self._lost)
        return self.runner

    def check(self) -> None:
        """Refuse work once the group is lost (before a stream opens: a plain error response)."""
        if self.lost is not None:
            raise GroupLost(f"{self.lost.message}; the server is shutting down")

    # -- ranks > 0 --------------------------------------------------------------------------------
    def follow(self, model: Any, cache: CacheOps) -> int:
        """Replay rank 0's steps; the exit status (0 after rank 0 shut down, 75 when it was lost)."""
        from tinytitan.engine.device.distributed.follower import follow

        try:
            return follow(model, self.channel, cache)
        except GroupLost as exc:
            log.error("rank %d: %s", self.rank, exc.message)
            return EXIT_GROUP_LOST
        finally:
            self.watchdog.close()

    # -- losing the group -------------------------------------------------------------------------
    def _expired(self, reason: str) -> None:
        error = GroupLost(f"a rank of the distributed group stopped answering ({reason})")
        if self.runner is not None:
            self.runner.lose(error)  # fails the rows; calls _lost
        else:
            self._lost(error)

    def _lost(self, error: GroupLost) -> None:
        with self._lost_lock:
            if self.lost is not None:
                return
            self.lost = error
        grace = EXIT_GRACE if self.group.leader and self.runner is not None else 0.0
        log.error("rank %d: the distributed group is lost; exiting with status %d", self.rank, EXIT_GROUP_LOST)
        timer = threading.Timer(grace, self._exit, args=(EXIT_GROUP_LOST,))
        timer.daemon = True
        timer.start()
