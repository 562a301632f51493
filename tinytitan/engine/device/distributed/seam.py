"""Where a model backend meets the distributed group: loading this rank's shard (and, on rank 0,
making the lockstep batch) and the backend's prompt cache as the lockstep loops use it.

The backend is read through ``Sharded``, the few attributes these functions use (the mlx backend
has them), so the device stage never imports the models stage above it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tinytitan.engine.device.distributed.lockstep import CacheOps

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed import Distributed
    from tinytitan.engine.prompt_cache.memory import PromptCache

__all__ = ["Sharded", "cache_ops", "load_shard"]


class _Source(Protocol):
    @property
    def path(self) -> Path: ...


class Sharded(Protocol):
    """What of a model backend the group's loading and prompt cache read."""

    @property
    def source(self) -> _Source: ...

    @property
    def dtype(self) -> str: ...

    @property
    def identity(self) -> str: ...

    @property
    def prompt_cache(self) -> PromptCache: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def lltokenizer(self) -> Any: ...

    @property
    def model(self) -> Any:
        """The loaded weights (this rank's shard)."""
        ...


def load_shard(backend: Sharded, distributed: Distributed) -> Any:
    """This rank's shard of ``backend``'s model; on rank 0 the batch that drives every rank is made."""
    model = distributed.load(backend.source.path, backend.dtype)
    if distributed.group.leader:
        # built now, not at the first structured request: it holds the GIL for a second or more,
        # which would delay the heartbeat
        _ = backend.lltokenizer
        distributed.start_leader(model, cache_ops(backend, model), backend.tokenizer.eos_token_ids)
    return model


def cache_ops(backend: Sharded, model: Any = None) -> CacheOps:
    """The backend's prompt cache under this rank's identity (its key names the shard)."""
    from mlx_lm.models.cache import make_prompt_cache

    identity = backend.identity
    prompt_cache = backend.prompt_cache

    def remember(sequence: list[int], cache: list[Any], reused: int) -> None:
        offset = getattr(cache[0], "offset", None) if cache else None
        if isinstance(offset, int) and reused < offset <= len(sequence):
            prompt_cache.store(sequence[:offset], cache, identity)

    def fresh() -> Any:
        return make_prompt_cache(model if model is not None else backend.model)

    return CacheOps(fetch=lambda tokens: prompt_cache.fetch(tokens, identity), fresh=fresh, remember=remember)
