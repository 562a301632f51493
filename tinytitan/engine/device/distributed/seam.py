"""Where the mlx backend meets the distributed group: loading this rank's shard (and, on rank 0,
making the lockstep batch) and the backend's prompt cache as the lockstep loops use it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinytitan.engine.device.distributed.lockstep import CacheOps

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed import Distributed
    from tinytitan.engine.models.mlx.backend import MlxBackend

__all__ = ["cache_ops", "load_shard"]


def load_shard(backend: MlxBackend, distributed: Distributed) -> Any:
    """This rank's shard of ``backend``'s model; on rank 0 the batch that drives every rank is made."""
    model = distributed.load(backend.source.path, backend.dtype)
    if distributed.group.leader:
        # built now, not at the first structured request: it holds the GIL for a second or more,
        # which would delay the heartbeat
        _ = backend.lltokenizer
        distributed.start_leader(model, cache_ops(backend, model), backend.tokenizer.eos_token_ids)
    return model


def cache_ops(backend: MlxBackend, model: Any = None) -> CacheOps:
    """The backend's prompt cache under this rank's identity (its key names the shard)."""
    from mlx_lm.models.cache import make_prompt_cache

    identity = backend.identity
    prompt_cache = backend.prompt_cache

    def remember(sequence: list[int], cache: list[Any], reused: int) -> None:
        offset = getattr(cache[0], "offset", None) if cache else None
        if isinstance(offset, int) and reused < offset <= len(sequence):
            prompt_cache.store(sequence[:offset], cache, identity)

    def fresh() -> Any:
        return make_prompt_cache(model if model is not None else backend._model)

    return CacheOps(fetch=lambda tokens: prompt_cache.fetch(tokens, identity), fresh=fresh, remember=remember)
