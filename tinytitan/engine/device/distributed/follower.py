"""Ranks > 0: no HTTP, no queue, no tokenizer work — replay what rank 0 broadcasts, step by step.

``follow`` waits for the next control message (at most the watchdog's timeout: rank 0 sends a
heartbeat when idle), runs each request exactly as rank 0 does (``lockstep.Session``), and returns
the process's exit status: 0 after ``SHUTDOWN``; ``GroupLost`` propagates when rank 0 is gone.
"""

from __future__ import annotations

import logging
from typing import Any

from tinytitan.engine.device.distributed.channel import Channel, GroupLost, Kind
from tinytitan.engine.device.distributed.lockstep import CacheOps, Session, agree

__all__ = ["follow"]

log = logging.getLogger("tinytitan.distributed")


def follow(model: Any, channel: Channel, cache: CacheOps) -> int:
    """Follow rank 0 until it shuts the group down (0) or is lost (raises ``GroupLost``)."""
    rank = channel.group.rank
    served = 0
    while True:
        kind, a, b, _ = channel.exchange()
        if kind == Kind.PING:
            continue
        if kind == Kind.SHUTDOWN:
            log.info("rank %d: rank 0 shut the group down after %d requests", rank, served)
            return 0
        if kind != Kind.JOB:
            raise GroupLost(f"rank {rank} is out of step: {kind.name} while idle")
        served += 1
        outcome = _request(model, channel, cache, n=a, reused=b)
        log.info("rank %d: request %d %s; idle", rank, served, outcome)


def _request(model: Any, channel: Channel, ops: CacheOps, *, n: int, reused: int) -> str:
    """One request, replayed; a word on how it ended (for the log)."""
    tokens = channel.tokens(None, n)
    cache, agreed, reachable = agree(ops, tokens, reused)
    if channel.exchange(status=0 if reachable else 1)[3]:
        cache, agreed = None, 0
    session = Session(model, channel, cache if cache is not None else ops.fresh(), tokens[:agreed])
    tail = tokens[agreed:]
    decoded = 0
    while True:
        kind, a, b, _ = channel.exchange()
        if kind == Kind.PREFILL and 0 < a <= len(tail):
            if b:
                session.forward(tail[:a])
            else:
                session.prefill(tail[:a])
            tail = tail[a:]
        elif kind == Kind.DECODE:
            session.forward([a])
            decoded += 1
        elif kind == Kind.END:
            if a:
                session.remember(ops)
            state = ("left early (cancelled or stopped)" if b else "ended") if a else "failed on rank 0"
            return f"{state} ({n} prompt tokens, {agreed} reused, {decoded + 1 if not tail else 0} generated)"
        else:
            raise GroupLost(f"rank {channel.group.rank} is out of step: {kind.name} during a request")
