"""A quantized KV cache's decode attention on the CPU, its key heads shared among the cores.

At a decode step mlx-lm attends over a quantized cache (``serve --kv-bits``) with two
``mx.quantized_matmul`` products: the scores against the packed keys, and the weights against the
packed values. mlx 0.32's CPU kernels run each product on one thread, and the keys' product (the
transposed one) is the slow one: 5–8× its float32 product on a 2-core x86 CPU, so one layer's
attention costs 2–4.5× float32's (``benchmarks/bench_kv.py --only attention``) and a 0.6B model's
decode step took up to half again as long. Here the key heads are split into one slice per usable core, each slice's
attention (mlx-lm's own function, unchanged) is built on a CPU stream of its own — mlx runs each
stream on a thread of its own — and the slices are joined: on 2 cores the attention takes about
half the time (an odd number of key heads splits unevenly, and gains less).

``install()`` routes mlx-lm's quantized attention here (through ``mlx_lm_adapter``), process-wide,
when the device worker loads a model that computes in float32 on the CPU. The route acts only on
the device thread for a float32 CPU step of a few queries (a decode step, a drafts' verify pass)
over more than one key head, with more than one core free (``tinytitan.cpu_share``: one on a busy
machine); everything else goes to mlx-lm's own function, as does every GPU step.
"""

from __future__ import annotations

import threading
from typing import Any

from tinytitan import cpu_share
from tinytitan.cores import usable_cores
from tinytitan.engine.device.thread import is_device_thread

__all__ = ["MOST_QUERIES", "install", "installed", "split_attention", "uninstall", "whole_attention"]

MOST_QUERIES = 32  # more is a prefill chunk, over dequantized keys anyway (kv/cache.py's DENSE_FROM)

_lock = threading.Lock()
_original: Any = None
_local = threading.local()  # mlx's streams belong to the thread that made them: each device thread its own


def install() -> None:
    """Route mlx-lm's quantized attention through ``_dispatch`` (idempotent, process-wide)."""
    global _original
    from tinytitan.engine import mlx_lm_adapter

    with _lock:
        if _original is None:
            _original = mlx_lm_adapter.route_quantized_attention(_dispatch)


def installed() -> bool:
    return _original is not None


def uninstall() -> None:
    """Give mlx-lm its own quantized attention back (tests compare the two)."""
    global _original
    from tinytitan.engine import mlx_lm_adapter

    with _lock:
        if _original is not None:
            mlx_lm_adapter.route_quantized_attention(_original)
            _original = None


def _dispatch(
    queries: Any, q_keys: Any, q_values: Any, scale: float, mask: Any, group_size: int = 64, bits: int = 8
) -> Any:
    parts = _parts(queries, q_keys)
    if parts > 1:
        return split_attention(queries, q_keys, q_values, scale, mask, group_size, bits, parts=parts)
    return _original(queries, q_keys, q_values, scale=scale, mask=mask, group_size=group_size, bits=bits)


def _parts(queries: Any, q_keys: Any) -> int:
    """How many slices this step's key heads go in (1: mlx-lm's own function, whole)."""
    import mlx.core as mx

    if not is_device_thread() or queries.ndim != 4 or queries.shape[2] > MOST_QUERIES:
        return 1
    if queries.dtype != mx.float32 or mx.default_device() != mx.cpu:
        return 1
    return min(cpu_share.threads(usable_cores()), int(q_keys[0].shape[-3]))


def split_attention(
    queries: Any, q_keys: Any, q_values: Any, scale: float, mask: Any, group_size: int, bits: int, *, parts: int
) -> Any:
    """mlx-lm's quantized attention with the key heads in ``parts`` slices, each built on a CPU stream
    of its own (so computed on a thread of its own), joined along the heads. The same numbers as one
    call: each query head attends to its own key head either way."""
    import mlx.core as mx

    original = whole_attention()
    kv_heads = q_keys[0].shape[-3]
    group = queries.shape[1] // kv_heads
    cuts = [kv_heads * i // parts for i in range(parts + 1)]
    outs = []
    for start, stop, stream in zip(cuts, cuts[1:], _cpu_streams(parts), strict=False):
        with mx.stream(stream):
            outs.append(
                original(
                    queries[:, start * group : stop * group],
                    tuple(x[:, start:stop] for x in q_keys),
                    tuple(x[:, start:stop] for x in q_values),
                    scale=scale,
                    mask=mask,  # (rows, 1, queries, keys): shared by the heads
                    group_size=group_size,
                    bits=bits,
                )
            )
    return mx.concatenate(outs, axis=1)


def _cpu_streams(count: int) -> list[Any]:
    import mlx.core as mx

    streams: list[Any] = getattr(_local, "streams", [])
    while len(streams) < count:
        streams.append(mx.new_stream(mx.cpu))
    _local.streams = streams
    return streams[:count]


def whole_attention() -> Any:
    """mlx-lm's own quantized attention (what the route replaced, or the function itself before it)."""
    if _original is not None:
        return _original
    from mlx_lm.models import base

    return base.quantized_scaled_dot_product_attention
