"""One request's model state on one rank, fed the same inputs in the same order on every rank.

Rank 0 (``leader.py``) and the followers (``follower.py``) both drive a ``Session``: the same
prefill chunks, the same single-token decode steps, each evaluated as one collective computation
under the watchdog (tensor parallelism sums every layer across the ranks; a pipeline hands the
hidden state from stage to stage). Only rank 0 looks at the logits: it applies the penalties and the
grammar mask, samples, and broadcasts the token — so the followers need no sampler, seed or grammar,
and every rank stays in step however its floating point rounds.

The prompt cache works on every rank: each rank stores its own shard of the KV state under the same
token sequence when a request ends, so the ranks' caches hold the same prefixes. Rank 0 still
decides (``JOB`` carries how much it reuses; a follower that cannot reuse as much says so in
``AGREE`` and the request starts from scratch everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tinytitan.engine.device.distributed.channel import Channel

__all__ = ["CacheOps", "Session", "chunks"]


@dataclass(frozen=True)
class CacheOps:
    """The backend's prompt cache, as the lockstep loops use it."""

    fetch: Callable[[Sequence[int]], tuple[Any, int]]  # (a private trimmed copy or None, tokens reused)
    fresh: Callable[[], Any]  # an empty KV cache for the model
    remember: Callable[[list[int], Any, int], None]  # store (sequence, cache, reused) when a request ends


def chunks(n: int, step: int) -> list[int]:
    """Prefill chunk sizes for an ``n``-token prompt tail: as ``mlx_lm.generate_step`` cuts it
    (chunks of ``step`` while more than one token is left; the last chunk gives the logits)."""
    sizes: list[int] = []
    while n - sum(sizes) > 1:
        sizes.append(min(step, n - sum(sizes) - 1))
    sizes.append(n - sum(sizes))
    return sizes


def agree(ops: CacheOps, tokens: Sequence[int], reused: int) -> tuple[Any, int, bool]:
    """A follower's cache for ``tokens`` trimmed to rank 0's ``reused``; False when it cannot reach it."""
    cache, got = ops.fetch(tokens)
    if cache is None or got < reused:
        return None, 0, reused == 0
    if got > reused:
        from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

        if not can_trim_prompt_cache(cache):
            return None, 0, False
        trim_prompt_cache(cache, got - reused)
    return cache, reused, True


class Session:
    def __init__(self, model: Any, channel: Channel, cache: Any, prefix: Sequence[int]) -> None:
        self.model = model
        self.channel = channel
        self.cache = cache
        self.reused = len(prefix)
        self.sequence: list[int] = list(prefix)  # every token the KV cache holds

    def prefill(self, chunk: Sequence[int]) -> None:
        """Run prompt tokens into the cache (no logits), as generate_step's prefill does."""
        import mlx.core as mx

        def run() -> Any:
            self.model(mx.array(list(chunk))[None], cache=self.cache)
            return [c.state for c in self.cache]

        self.channel.collective(run, f"prefilling {len(chunk)} prompt tokens")
        self.sequence.extend(chunk)
        mx.clear_cache()

    def forward(self, inputs: Sequence[int]) -> Any:
        """Feed ``inputs``; the evaluated logits of the last position, shape ``(1, vocab)``."""
        import mlx.core as mx

        logits = self.channel.collective(
            lambda: self.model(mx.array(list(inputs))[None], cache=self.cache)[:, -1, :], "decoding a token"
        )
        self.sequence.extend(inputs)
        return logits

    def remember(self, ops: CacheOps) -> None:
        ops.remember(self.sequence, self.cache, self.reused)
