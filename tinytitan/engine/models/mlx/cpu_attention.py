"""Attention over prompt chunks on the CPU, computed with NumPy.

mlx's CPU backend evaluates ``exp`` one element at a time (13 ns an element on a 2-core Zen 4,
where NumPy's vectorized ``exp`` takes 1 ns), and attention over a long prompt is mostly ``exp``:
a 256-token chunk against 3,137 keys spends ~240 ms per layer of the 0.6B shape in
``mx.fast.scaled_dot_product_attention`` (mlx's unfused CPU fallback: scores, mask, softmax,
values) and ~50 ms here on 2 cores (``benchmarks/bench_decode.py --only attention``). The query
heads that share a key head are stacked into one matrix (one product per key head, not one per
query head), and the queries go in blocks of ``BLOCK``, each against the keys it may see, so a
long chunk costs what causal attention needs rather than its full square.

The device worker calls ``install_for(dtype, device)`` when it loads a model: for a model that
computes in float32 on the CPU it wraps ``mx.fast.scaled_dot_product_attention`` (model code looks
it up on every call; once per process). The wrapper acts only on the device thread
(``tinytitan.engine.device.thread``) and takes prompt chunks — more than one query — in float32 on
the CPU with a causal or boolean mask (or none) and no attention sinks; everything else (another
thread, a decode step, a GPU, bf16, sinks, additive masks) goes to mlx's own. It evaluates its
inputs, so it ends mlx's lazy graph at every layer: right for a prefill, which is evaluated chunk by
chunk anyway.

The key heads are shared among one worker per usable core (``tinytitan.cores``), and while they
run every BLAS in the process gets one thread (``threadpoolctl``), or each worker's products would
start a BLAS thread per core of their own and the cores would be oversubscribed (attention 2.3×
slower on 2 cores). The device thread waits for the workers meanwhile, so nothing else is slowed.
On a busy machine the workers are as many as ``tinytitan.cpu_share`` gives the products (issue 43):
with one, the device thread computes every head itself, with no hand-off to wait on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tinytitan import cpu_share
from tinytitan.cores import usable_cores
from tinytitan.engine.device.thread import is_device_thread

__all__ = ["BLOCK", "attention", "install", "install_for", "installed", "uninstall"]

BLOCK = 256  # query rows per block: the masked part of a block is at most BLOCK × BLOCK / 2 scores

_lock = threading.Lock()
_one_blas_thread = threading.Lock()
_original: Any = None
_workers: Any = None  # the threads attention shares its heads among, one per core
_blas: Any = None  # threadpoolctl's controller of the BLAS libraries loaded (NumPy's among them)
_THREADS = usable_cores()


def installed() -> bool:
    return _original is not None


def install_for(dtype: object, device: str | None) -> bool:
    """Install for a model that computes in ``dtype`` (``"float32"`` or ``mx.float32``; None: as its
    checkpoint is, unknown) on ``device`` ("cpu", or None for mlx's default device). Whether it
    applies to that model; another model's calls go to mlx's own attention either way."""
    import mlx.core as mx

    on_cpu = device == "cpu" or (device is None and mx.default_device() == mx.cpu)
    if not on_cpu or dtype is None or str(dtype).removeprefix("mlx.core.") != "float32":
        return False
    install()
    return True


def install() -> None:
    """Route CPU prefill attention through ``attention`` (idempotent, process-wide)."""
    global _original
    import mlx.core as mx

    with _lock:
        if _original is None:
            _original = mx.fast.scaled_dot_product_attention
            mx.fast.scaled_dot_product_attention = _dispatch


def uninstall() -> None:
    """Give mlx its own attention back (benchmarks and tests compare the two)."""
    global _original
    import mlx.core as mx

    with _lock:
        if _original is not None:
            mx.fast.scaled_dot_product_attention = _original
            _original = None


def _dispatch(q: Any, k: Any, v: Any, *, scale: float, mask: Any = None, sinks: Any = None, **extra: Any) -> Any:
    if is_device_thread() and _takes(q, k, v, mask, sinks, extra):
        return attention(q, k, v, scale=scale, mask=mask)
    if sinks is not None:
        extra["sinks"] = sinks
    return _original(q, k, v, scale=scale, mask=mask, **extra)


def _takes(q: Any, k: Any, v: Any, mask: Any, sinks: Any, extra: dict[str, Any]) -> bool:
    if extra or sinks is not None or q.ndim != 4 or q.shape[2] < 2:  # a decode step leaves here, every layer
        return False
    import mlx.core as mx

    if not (q.dtype == k.dtype == v.dtype == mx.float32) or mx.default_device() != mx.cpu:
        return False
    if mask is None or isinstance(mask, str):
        return mask in (None, "causal")
    return isinstance(mask, mx.array) and mask.dtype == mx.bool_


def attention(q: Any, k: Any, v: Any, *, scale: float, mask: Any = None) -> Any:
    """softmax(q·kᵀ·scale, masked)·v for q ``(B, Hq, L, D)``, k ``(B, Hkv, S, D)``, v ``(B, Hkv, S, Dv)``.

    ``mask``: None, ``"causal"`` (query i sees keys up to ``S - L + i``, as mlx aligns it) or a
    boolean array broadcastable to ``(B, Hq, L, S)`` (True = may attend). The key heads are shared
    out among the cores (NumPy releases the GIL in its loops and products)."""
    import mlx.core as mx
    import numpy as np

    mx.eval(q, k, v, *([mask] if isinstance(mask, mx.array) else []))
    batch, q_heads, length, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    heads = _Heads(
        queries=np.asarray(q).reshape(batch * kv_heads, group, length, dim),
        keys=np.asarray(k).reshape(batch * kv_heads, keys, dim),
        values=np.asarray(v).reshape(batch * kv_heads, keys, v.shape[-1]),
        allowed=_mask_rows(np.asarray(mask), batch, kv_heads, group) if isinstance(mask, mx.array) else None,
        causal=isinstance(mask, str),
        scale=scale,
        kv_heads=kv_heads,
        out=np.empty((batch * kv_heads, group, length, v.shape[-1]), dtype=np.float32),
    )
    units = range(batch * kv_heads)
    count = cpu_share.threads(_THREADS)  # fewer on a busy machine (tinytitan.cpu_share)
    workers, blas = _pool()
    share = -(-len(units) // count)
    # one at a time, and the watch waits: each restores what it found
    with _one_blas_thread, cpu_share.steady(), blas.limit(limits=1, user_api="blas"):
        if count == 1:  # here: no hand-off to wait on
            heads.attend(units)
        else:
            list(workers.map(heads.attend, [units[i : i + share] for i in range(0, len(units), share)]))
    return mx.array(heads.out.reshape(batch, q_heads, length, v.shape[-1]))


@dataclass
class _Heads:
    queries: Any  # (B·Hkv, group, L, D)
    keys: Any  # (B·Hkv, S, D)
    values: Any
    allowed: Any  # (B|1, Hkv|1, group|1, L, S) booleans, or None
    causal: bool
    scale: float
    kv_heads: int
    out: Any  # (B·Hkv, group, L, D)

    def attend(self, units: range) -> None:
        import numpy as np

        _, group, length, dim = self.queries.shape
        total_keys = self.keys.shape[1]
        lowest = np.finfo(np.float32).min  # not -inf: a row with every key masked stays finite, as in mlx
        for unit in units:
            for start in range(0, length, BLOCK):
                stop = min(start + BLOCK, length)
                rows = stop - start
                seen = total_keys - length + stop if self.causal else total_keys  # the keys the block may see
                block = np.ascontiguousarray(self.queries[unit, :, start:stop]).reshape(group * rows, dim)
                scores = block @ self.keys[unit, :seen].T
                scores *= self.scale
                grid = scores.reshape(group, rows, seen)
                allowed = self._allowed(unit, start, stop, seen)
                if allowed is not None:
                    np.copyto(grid, lowest, where=~allowed)
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                total = scores.sum(axis=-1, keepdims=True)
                values = scores @ self.values[unit, :seen]
                values /= total
                self.out[unit, :, start:stop] = values.reshape(group, rows, -1)

    def _allowed(self, unit: int, start: int, stop: int, seen: int) -> Any:
        """The block's mask, ``(group|1, rows, seen)``; None when every score stays."""
        import numpy as np

        if self.causal:  # a query sees the keys up to its own position
            first = seen - (stop - start)
            return (np.arange(seen)[None] <= np.arange(first, seen)[:, None])[None]
        if self.allowed is None:
            return None
        b, h = divmod(unit, self.kv_heads)
        batches, heads = self.allowed.shape[:2]
        return self.allowed[b if batches > 1 else 0, h if heads > 1 else 0, :, start:stop, :seen]


def _pool() -> tuple[Any, Any]:
    """The workers, and the controller of every BLAS loaded (after NumPy, whose products they run)."""
    global _workers, _blas
    with _lock:
        if _workers is None:
            from concurrent.futures import ThreadPoolExecutor

            import numpy  # noqa: F401 - loads NumPy's BLAS before threadpoolctl looks for it
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
            _workers = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="tinytitan-attention")
    return _workers, _blas


def _mask_rows(mask: Any, batch: int, kv_heads: int, group: int) -> Any:
    """A boolean mask as ``(B|1, Hkv|1, group|1, L, S)``, to broadcast over the stacked scores."""
    while mask.ndim < 4:
        mask = mask[None]
    if mask.shape[1] == 1:
        return mask[:, :, None]
    return mask.reshape(mask.shape[0], kv_heads, group, *mask.shape[2:])
