"""A prompt-cache snapshot's KV layers as the disk tier writes them (numpy), and caches built back.

``views(cache)`` takes zero-copy numpy views of every layer of a snapshot whose layers are all plain
KV caches (mlx-lm's ``KVCache``, or ``kv/cache.py``'s ``FullRow``) or all quantized ones (its
``QuantizedKVCache`` / ``QuantizedRow``): ``{"k", "v"}`` or ``{"k", "ks", "kb", "v", "vs", "vb"}`` per
layer (``file.py``). Any other kind of layer (a sliding window, a recurrent state) keeps the snapshot
memory-only. ``caches(parts, kv)`` joins the blocks of a chain back into one row's caches: quantized
ones when any block is quantized (a full-precision block among them — written by a row that was
short of ``--quantized-kv-start`` — is quantized as it joins), else full-precision ones. Both run on
the device thread (they call MLX).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tinytitan.engine.prompt_cache.file import FULL, QUANTIZED, Layer

if TYPE_CHECKING:
    from tinytitan.engine.kv.form import KvForm

__all__ = ["Layout", "caches", "views"]

_MX_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


@dataclass(frozen=True, slots=True)
class Layout:
    """What a block's tensors are: the float dtype, and for a quantized block its bits and group size."""

    dtype: str  # F32, F16, BF16
    bits: int | None = None
    group_size: int | None = None


def views(cache: list[Any]) -> tuple[Layout, list[Layer]] | None:
    """Zero-copy numpy views of each layer's tensors (evaluated here, on the device thread); None for a
    snapshot the disk tier does not keep."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache, QuantizedKVCache

    from tinytitan.engine.kv.cache import FullRow

    if not cache or any(getattr(c, "keys", None) is None for c in cache):
        return None

    def held(c: Any) -> tuple[Any, ...]:  # a layer's arrays cut to the tokens it holds
        parts = (*c.keys, *c.values) if isinstance(c.keys, tuple) else (c.keys, c.values)
        return tuple(x[..., : c.offset, :] for x in parts)

    if all(type(c) in (KVCache, FullRow) for c in cache):
        layout = Layout(_dtype(cache[0].keys))
        float_roles: tuple[str, ...] = FULL
        arrays = [dict(zip(FULL, held(c), strict=True)) for c in cache]
    elif all(isinstance(c, QuantizedKVCache) for c in cache):
        first = cache[0]
        if any((c.bits, c.group_size) != (first.bits, first.group_size) for c in cache):
            return None
        layout = Layout(_dtype(first.keys[1]), first.bits, first.group_size)
        float_roles = ("ks", "kb", "vs", "vb")
        arrays = [dict(zip(QUANTIZED, held(c), strict=True)) for c in cache]
    else:
        return None
    if not layout.dtype:
        return None
    if layout.dtype == "BF16":  # numpy has no bfloat16: its raw 16-bit pattern travels
        arrays = [{r: x.view(mx.uint16) if r in float_roles else x for r, x in layer.items()} for layer in arrays]
    mx.eval(arrays)
    return layout, [{r: np.asarray(x) for r, x in layer.items()} for layer in arrays]


def _dtype(array: Any) -> str:
    """The safetensors name of an MLX array's float dtype ("" for one the disk tier does not write)."""
    return _MX_DTYPES.get(str(array.dtype).removeprefix("mlx.core."), "")


def caches(parts: list[tuple[Layout, list[Layer]]], kv: KvForm | None) -> list[Any]:
    """One row's caches holding the blocks ``parts`` in order (each: its layout and layers). ``kv``: the
    server's KV form (the rows' own), None for a model kept in full precision."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    from tinytitan.engine.kv.cache import FullRow, QuantizedRow
    from tinytitan.engine.kv.form import KvForm

    def floats(x: np.ndarray, layout: Layout) -> Any:
        a = mx.array(x)
        return a.view(mx.bfloat16) if layout.dtype == "BF16" else a

    quantized = next((layout for layout, _ in parts if layout.bits is not None), None)
    out: list[Any] = []
    for i in range(len(parts[0][1])):  # joined by mlx: NumPy's join into fresh memory was 10× slower
        if quantized is None:
            k = mx.concatenate([floats(layers[i]["k"], layout) for layout, layers in parts], axis=2)
            v = mx.concatenate([floats(layers[i]["v"], layout) for layout, layers in parts], axis=2)
            c: Any = FullRow(kv) if kv is not None else KVCache()
            c.keys, c.values, c.offset = k, v, k.shape[2]
            out.append(c)
            continue
        assert quantized.bits is not None and quantized.group_size is not None
        form = kv if kv is not None else KvForm(quantized.bits, quantized.group_size)
        joined: dict[str, list[Any]] = {role: [] for role in QUANTIZED}
        for layout, layers in parts:
            layer = layers[i]
            if layout.bits is None:  # a full-precision block in a quantized chain
                for kv_role in ("k", "v"):
                    packed = mx.quantize(floats(layer[kv_role], layout), group_size=form.group_size, bits=form.bits)
                    for role, x in zip((kv_role, f"{kv_role}s", f"{kv_role}b"), packed, strict=True):
                        joined[role].append(x)
                continue
            for role in QUANTIZED:
                joined[role].append(mx.array(layer[role]) if role in ("k", "v") else floats(layer[role], layout))
        row = QuantizedRow(form)
        whole = {role: mx.concatenate(xs, axis=2) for role, xs in joined.items()}
        row.keys = (whole["k"], whole["ks"], whole["kb"])
        row.values = (whole["v"], whole["vs"], whole["vb"])
        row.offset = whole["k"].shape[2]
        out.append(row)
    mx.eval([c.state for c in out])
    return out
