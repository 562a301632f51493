"""Per-row 3-D rotary positions (M-RoPE: Qwen2.5-VL) in mlx-lm's batch (issue 41).

Qwen2-VL's text model rotates each token by three position ids (time, height, width). They differ
from the 1-D index only inside an image span (its tokens' grid coordinates, offset by the text
before it); after a row's last image every id is ``index + delta``, one constant per row fixed by
its prompt. So a row needs two facts, both functions of its prompt alone (its token ids — virtual
ids name the pictures — and their grids): ``images.mrope_table`` (the prompt's ``(3, T)`` ids, made
on the CPU pool with the prompt) and ``delta``. A prompt-cache hit restores them exactly: they are made
again from the same ids.

mlx-lm's ``BatchGenerator`` keeps each row's KV cache aligned with the batch's rows through every
join, leave and split — ``merge`` a prompt's row caches, ``filter`` / ``extend`` / ``extract`` as
rows move — so a row's ``Rope`` rides on its first layer's cache (``RopeRow`` → ``RopeBatch``),
filtered and extended with it; the model (``images.ImageModel``) reads ``rope_of(cache)`` at each
call, with no look at mlx-lm's batch objects. A leaving row's cache is extracted as a plain
``KVCache``: the prompt cache never stores a row's positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache, KVCache

__all__ = ["Rope", "RopeBatch", "RopeRow", "positions", "rope_of", "tagged"]


@dataclass(frozen=True, eq=False)
class Rope:
    """A row's positions: its prompt's ``table`` (an MLX ``(3, T)`` array; None: plain 1-D) and the
    ``delta`` of every id past it."""

    table: Any = None
    delta: int = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> Rope:
        return self  # immutable; mlx-lm deep-copies a prompt batch's caches as it splits it


PLAIN = Rope()


class RopeBatch(BatchKVCache):  # type: ignore[misc]
    """mlx-lm's batch KV cache with each row's ``Rope`` beside it."""

    ropes: list[Rope]

    @classmethod
    def merge(cls, caches: Sequence[Any]) -> RopeBatch:
        batch = BatchKVCache.merge(caches)
        batch.__class__ = cls
        batch.ropes = [getattr(c, "rope", PLAIN) for c in caches]
        return batch  # type: ignore[no-any-return]

    def filter(self, batch_indices: Any) -> None:
        super().filter(batch_indices)
        keep = batch_indices.tolist() if hasattr(batch_indices, "tolist") else list(batch_indices)
        self.ropes = [self.ropes[i] for i in keep]

    def extend(self, other: Any) -> None:
        super().extend(other)
        self.ropes = self.ropes + list(getattr(other, "ropes", [PLAIN] * int(other.offset.shape[0])))


class RopeRow(KVCache):  # type: ignore[misc]
    """A row's first-layer cache before it joins, carrying its ``Rope`` into the batch."""

    def __init__(self, rope: Rope, like: Any = None) -> None:
        super().__init__()
        self.rope = rope
        if like is not None:
            self.keys, self.values, self.offset = like.keys, like.values, like.offset

    @classmethod
    def merge(cls, caches: Sequence[Any]) -> RopeBatch:
        return RopeBatch.merge(caches)


def tagged(cache: list[Any], rope: Rope) -> list[Any]:
    """A row's layer caches with ``rope`` on the first."""
    return [RopeRow(rope, cache[0]), *cache[1:]]


def rope_of(cache: Any) -> list[Rope] | None:
    """The rows' ``Rope`` of a batch cache; None where it carries none."""
    if not cache:
        return None
    ropes = getattr(cache[0], "ropes", None)
    return ropes if isinstance(ropes, list) else None


def positions(ropes: list[Rope], offset: Any, length: int) -> Any:
    """The ``(3, B, length)`` position ids of a call whose rows' caches hold ``offset`` ``(B,)``
    tokens: a one-row call (a prompt chunk, or a row's first token) reads its table, a decode step of
    several (past every picture) adds each row's delta."""
    index = offset[:, None] + mx.arange(length)[None, :]  # (B, L)
    if len(ropes) == 1 and ropes[0].table is not None:
        table, delta = ropes[0].table, ropes[0].delta
        size = table.shape[1]
        inside = mx.take(table, mx.minimum(index[0], size - 1), axis=1)  # (3, L)
        ids = mx.where(index[0] < size, inside, index[0] + delta)
        return ids[:, None, :]
    deltas = mx.array([r.delta for r in ropes], dtype=index.dtype)
    return mx.broadcast_to((index + deltas[:, None])[None], (3, len(ropes), length))
