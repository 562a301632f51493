"""The rank-0 → ranks channel: each step's work, broadcast with ``mx.distributed.all_sum``.

No transport of our own: a broadcast is an ``all_sum`` in which rank 0 contributes the message and
every other rank zeros (as ``mlx_lm.server`` shares its requests). A control message is four int32:
``(kind, a, b, status)`` — rank 0 fills ``kind, a, b``; followers fill ``status`` (so the sum also
tells rank 0 something back, e.g. that a follower cannot reuse the prompt-cache prefix rank 0
chose). Variable-length data (a request's prompt tokens) follows its ``JOB`` message as one int32
vector. Every exchange runs under the watchdog's deadline; a lost peer raises ``GroupLost``.

The messages, in the order a request sends them (``lockstep.py`` runs them on both sides):

    PING                      heartbeat while idle (followers bound their wait by it)
    JOB   n, reused           a request: n prompt tokens follow; rank 0 reuses ``reused`` of them
    <tokens>                  the prompt, n int32
    AGREE                     followers answer status = 1 when they cannot reuse that much (→ 0)
    PREFILL n, last           run the next n prompt tokens (last = 1: the chunk that gives logits)
    DECODE token              feed the token rank 0 sampled (sampling, seed, penalties and the grammar
                              mask ran on rank 0 only; followers need none of them)
    END   keep                the request ended (done, stop string, cancelled): store its KV if keep
    SHUTDOWN                  the server is stopping
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from tinytitan.engine.device.distributed.group import Group
from tinytitan.engine.device.distributed.liveness import Watchdog
from tinytitan.engine.errors import TinyTitanError

__all__ = ["Channel", "GroupLost", "Kind"]


class GroupLost(TinyTitanError, status=503, code="distributed_group_lost"):
    """A rank of the distributed group died or stopped answering: the server cannot generate."""


class Kind(enum.IntEnum):
    NONE = 0
    PING = 1
    JOB = 2
    AGREE = 3
    PREFILL = 4
    DECODE = 5
    END = 6
    SHUTDOWN = 7


class Channel:
    """Collectives over ``group``, each under ``watchdog``'s deadline."""

    def __init__(self, group: Group, watchdog: Watchdog) -> None:
        self.group = group
        self.watchdog = watchdog
        self.exchanges = 0  # control messages exchanged (tests, benchmarks)

    def exchange(
        self, kind: Kind = Kind.NONE, a: int = 0, b: int = 0, *, status: int = 0, wait: float | None = None
    ) -> tuple[Kind, int, int, int]:
        """One control message: rank 0 sends ``kind, a, b``; followers send ``status``; all get the sum.

        ``wait`` bounds the exchange (the watchdog's timeout by default; an idle follower waits
        for the next heartbeat this long).
        """
        import mlx.core as mx

        message = [int(kind), a, b, 0] if self.group.leader else [0, 0, 0, status]
        what = f"exchanging {kind.name if self.group.leader else 'the next step'} with the group"
        summed = self.collective(
            lambda: mx.distributed.all_sum(mx.array(message, dtype=mx.int32), **self._on), what, wait
        )
        self.exchanges += 1
        k, x, y, s = (int(v) for v in summed.tolist())
        try:
            return Kind(k), x, y, s
        except ValueError:
            raise GroupLost(f"the group is out of step (message kind {k})") from None

    def tokens(self, values: Sequence[int] | None, n: int) -> list[int]:
        """``n`` int32 from rank 0 (``values`` there, ``None`` on followers)."""
        import mlx.core as mx

        data = mx.array(list(values), dtype=mx.int32) if values is not None else mx.zeros((n,), dtype=mx.int32)
        summed = self.collective(lambda: mx.distributed.all_sum(data, **self._on), "sending a prompt to the group")
        return [int(v) for v in summed.tolist()]

    def collective(self, build: Any, what: str, wait: float | None = None) -> Any:
        """Build and evaluate a computation that involves the group, under the deadline."""
        import mlx.core as mx

        try:
            with self.watchdog.guard(what, wait):
                out = build()
                mx.eval(out)
                return out
        except RuntimeError as exc:  # the ring backend: "connection to a peer was lost"
            raise GroupLost(f"a rank of the distributed group was lost while {what}: {exc}") from exc

    @property
    def _on(self) -> dict[str, Any]:
        import mlx.core as mx

        return {"group": self.group.handle, "stream": mx.cpu}
