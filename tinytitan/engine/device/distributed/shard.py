"""Loading this rank's shard of the model: mlx-lm's own ``shard`` / ``pipeline`` methods.

The same steps as ``mlx_lm.utils.sharded_load`` — load lazily, shard (``model.shard(group)``) or
split into pipeline stages (``model.model.pipeline(group)``), evaluate only what this rank keeps,
then one ``all_sum`` as a barrier — with TinyTitan's compute dtype chosen in between (the checkpoint
is dequantized and cast *before* sharding, as ``loading.load_weights`` does on one machine).
``sharded_load`` itself is not called: it fetches from the hub and, for pipelines, needs a
``model.safetensors.index.json``; a resolved local directory needs neither.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tinytitan.engine.device.distributed.group import DistributedError, Group, choose_parallelism, offered

__all__ = ["load_sharded", "parallelism_for"]

log = logging.getLogger("tinytitan.distributed")


def parallelism_for(config: dict[str, Any], requested: str, size: int) -> str:
    """The parallelism for this architecture: its mlx-lm class is built without weights (lazy arrays,
    nothing evaluated) to see what it offers.

    ``serve`` asks on its main thread, before the engine and its device worker exist: the calling
    thread is a device thread while the skeleton is built (``TINYTITAN_DEVICE_CHECK``) — its arrays
    are never evaluated and are dropped here; a follower's main thread is its device thread anyway."""
    from tinytitan.engine.device import thread as device_thread
    from tinytitan.engine.mlx_lm_adapter import model_classes

    architecture = str(config.get("model_type", "?"))
    try:
        model_class, args_class = model_classes(config)
        with device_thread.claimed():
            skeleton = model_class(args_class.from_dict(config))
    except (ValueError, ImportError, KeyError, TypeError) as exc:
        raise DistributedError(f"mlx-lm cannot build the {architecture!r} architecture: {exc}") from exc
    parallel = choose_parallelism(requested, offered(skeleton), architecture)
    if parallel == "tensor":
        _check_heads(config, size)
    return parallel


def load_sharded(path: Path, dtype_setting: str, group: Group, parallel: str) -> Any:
    """This rank's part of the model (evaluated, in its compute dtype), split ``parallel``-wise."""
    import mlx.core as mx
    from mlx_lm.utils import dequantize_model, load_model

    from tinytitan.engine.device.placement import compute_dtype

    try:
        model, _config = load_model(path, lazy=True)
    except (FileNotFoundError, ValueError) as exc:
        raise DistributedError(f"cannot load the weights in {path}: {exc}") from exc
    target = compute_dtype(dtype_setting)
    if target is not None:
        model = dequantize_model(model)
        model.set_dtype(getattr(mx, target))
    try:
        if parallel == "tensor":
            model.shard(group.handle)
        else:
            model.model.pipeline(group.handle)
    except (ValueError, AssertionError) as exc:  # e.g. heads not divisible by the group size
        raise DistributedError(f"cannot split this model {parallel}-parallel over {group.size} ranks: {exc}") from exc
    # every array, the private ones too (Gemma 4's rope ``_freqs``): MLX streams are thread-local and
    # the lockstep runner's thread cannot evaluate what is still pending on this thread's stream
    mx.eval([v for _, m in model.named_modules() for v in m.values() if isinstance(v, mx.array)])
    mx.eval(model.parameters())
    model.eval()
    mx.eval(mx.distributed.all_sum(mx.array(1.0), group=group.handle, stream=mx.cpu))  # every rank loaded
    log.info(
        "rank %d of %d: loaded %s %s-parallel (%s)", group.rank, group.size, path.name, parallel, target or "native"
    )
    return model


def _check_heads(config: dict[str, Any], size: int) -> None:
    """Tensor parallelism splits attention by heads: each count must divide by the group size."""
    text = config.get("text_config", config)
    for key in ("num_attention_heads", "num_key_value_heads"):
        heads = text.get(key)
        if isinstance(heads, int) and heads % size:
            raise DistributedError(
                f"tensor parallelism over {size} ranks needs {key} ({heads}) divisible by {size}; "
                "use --parallel pipeline or another number of ranks"
            )
