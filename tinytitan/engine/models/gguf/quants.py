"""GGUF tensor data → the arrays of an MLX model: dense, or MLX's affine quantization (weight, scales, biases).

Decoded here with numpy alone — no MLX call, so a conversion may run on any thread while the device
worker serves another model (``convert.py``) — exactly:
- F32, F16, BF16: dense.
- Q4_0, Q4_1, Q8_0 (blocks of 32 with one scale, and a min for Q4_1) and Q4_K (super-blocks of
  256 = 8 groups of 32, each with its own 6-bit scale and min): MLX affine 4- or 8-bit with group
  size 32 holds every value as it is (the scale of a Q4_K group, ``d * sc``, is rounded to
  float16 as MLX keeps scales).
- Any other type llama.cpp's ``gguf`` package can dequantize (Q5_0, Q5_1, Q5_K, Q6_K, Q2_K, Q3_K,
  IQ…): dequantized, then requantized to MLX 8-bit with group size 32 (finer than the source, so
  nearly lossless) by ``affine_quantize``, MLX's own affine rule in numpy.
- BF16 stays bfloat16: its raw 16-bit patterns in an array of the ``BF16`` dtype, which the writer
  (``safetensors.py``) stores as safetensors' ``BF16``.

``mx.load`` reads GGUF too, but it rejects a whole file holding one Q5_0/Q5_K/Q3_K tensor (common in
Q4_K_M files whose widths are not multiples of 256), and its Q4_K decode disagrees with llama.cpp's
reference, so the data is decoded here instead. A type neither path knows is an
``UnsupportedQuantization`` naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinytitan.engine.models.gguf.file import GGUFFile, TensorInfo

__all__ = [
    "BF16",
    "EXACT_TYPES",
    "UnsupportedQuantization",
    "affine_quantize",
    "as_float32",
    "decode",
    "pack_bits",
    "q4_k_groups",
    "tensor_nbytes",
]

GROUP = 32
BF16 = np.dtype([("bf16", "<u2")])  # bfloat16 as its raw bits: numpy has no bfloat16 of its own
# ggml type -> (values per block, bytes per block), for the types decoded here
_BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34), 12: (256, 144)}
EXACT_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q8_0", "Q4_K")


class UnsupportedQuantization(ValueError):
    """A tensor type this build cannot decode; the message names it and the tensor."""


def _gguf_quants() -> Any:
    try:
        import gguf.quants as quants
    except ImportError:
        return None
    return quants


def _block(info: TensorInfo) -> tuple[int, int]:
    if info.ggml_type in _BLOCKS:
        return _BLOCKS[info.ggml_type]
    try:
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        return GGML_QUANT_SIZES[GGMLQuantizationType(info.ggml_type)]
    except (ImportError, ValueError, KeyError):
        raise UnsupportedQuantization(_unsupported(info)) from None


def _unsupported(info: TensorInfo) -> str:
    exact = ", ".join(EXACT_TYPES)
    if _gguf_quants() is None:
        more = "; the `gguf` package (`pip install gguf`) adds Q5_0, Q5_1, Q5_K, Q6_K, Q2_K, Q3_K and the IQ types"
    else:
        more = " and the types llama.cpp's `gguf` package dequantizes"
    return f"GGUF quantization type {info.type_name} (tensor {info.name}) is not supported; supported: {exact}{more}"


def tensor_nbytes(info: TensorInfo) -> int:
    per, size = _block(info)
    count = int(np.prod(info.shape)) if info.shape else 1
    if count % per:
        raise UnsupportedQuantization(f"tensor {info.name}: {count} values do not fill {info.type_name} blocks")
    return count // per * size


def pack_bits(q: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned ``bits``-bit values (last axis) into uint32 words, element k at bits ``k * bits``."""
    per = 32 // bits
    q = q.astype(np.uint32).reshape(*q.shape[:-1], q.shape[-1] // per, per)
    shifts = (np.arange(per, dtype=np.uint32) * bits).astype(np.uint32)
    packed: np.ndarray = np.bitwise_or.reduce(q << shifts, axis=-1).astype(np.uint32)
    return packed


def _f16(blocks: np.ndarray, start: int) -> np.ndarray:
    return np.ascontiguousarray(blocks[..., start : start + 2]).view(np.float16)[..., 0]


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes → 32 values: the low nibbles first, then the high ones (ggml's order)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def q4_k_groups(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_K super-blocks (…, 144 bytes) → 4-bit values (…, 256), scales and mins (…, 8) in float32."""
    d = _f16(blocks, 0).astype(np.float32)[..., None]
    dmin = _f16(blocks, 2).astype(np.float32)[..., None]
    s = blocks[..., 4:16].astype(np.uint8)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 0x0F) | ((s[..., 0:4] >> 6) << 4)], axis=-1)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], axis=-1)
    qs = blocks[..., 16:144].reshape(*blocks.shape[:-1], 4, 32)
    q = np.stack([qs & 0x0F, qs >> 4], axis=-2).reshape(*blocks.shape[:-1], 256)
    return q, d * sc.astype(np.float32), -dmin * mn.astype(np.float32)


def _affine(
    rows: tuple[int, ...], q: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int
) -> dict[str, np.ndarray]:
    q = q.reshape(*rows, -1)
    return {
        "weight": pack_bits(q, bits),
        "scales": scales.reshape(*rows, -1).astype(np.float16),
        "biases": biases.reshape(*rows, -1).astype(np.float16),
    }


def as_float32(array: np.ndarray) -> np.ndarray:
    """A decoded dense array in float32 (bfloat16's bits widened: exact)."""
    if array.dtype == BF16:
        widened: np.ndarray = (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return widened
    return array.astype(np.float32)


def affine_quantize(values: np.ndarray, bits: int = 8, group: int = GROUP) -> dict[str, np.ndarray]:
    """MLX's affine quantization (``mx.quantize``'s rule) of float32 ``values`` (last axis a multiple of
    ``group``): per group, the edge farther from zero is represented exactly when it can be, the other
    end within one step; scales and biases kept in float16 as MLX keeps them."""
    rows = values.shape[:-1]
    w = values.reshape(*rows, -1, group).astype(np.float32)
    w_max, w_min = w.max(axis=-1, keepdims=True), w.min(axis=-1, keepdims=True)
    bins = float((1 << bits) - 1)
    below = np.abs(w_min) > np.abs(w_max)
    scales = np.maximum((w_max - w_min) / bins, 1e-7)
    scales = np.where(below, scales, -scales)
    edge = np.where(below, w_min, w_max)
    q0 = np.round(edge / scales)
    scales = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1), scales)
    biases = np.where(q0 == 0, 0, edge)
    q = np.clip(np.round((w - biases) / scales), 0, bins).astype(np.uint32)
    return _affine(rows, q, scales, biases, bits)


def decode(gguf: GGUFFile, info: TensorInfo) -> dict[str, np.ndarray]:
    """``{"weight": …}`` (dense) or ``{"weight", "scales", "biases"}`` (MLX affine, group 32)."""
    raw = gguf.raw(info, tensor_nbytes(info))
    shape, kind = info.shape, info.ggml_type
    if kind == 0:
        return {"weight": raw.view(np.float32).reshape(shape)}
    if kind == 1:
        return {"weight": raw.view(np.float16).reshape(shape)}
    if kind == 30:
        return {"weight": raw.view(BF16).reshape(shape)}
    per, size = _block(info)
    blocks = raw.reshape(*shape[:-1], shape[-1] // per, size)
    if kind == 8:  # Q8_0: d, 32 × int8
        d = _f16(blocks, 0)[..., None]
        q = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        return _affine(shape[:-1], q, d, d * np.float16(-128), 8)
    if kind == 2:  # Q4_0: d, 16 bytes of nibbles; value = d * (q - 8)
        d = _f16(blocks, 0)[..., None]
        return _affine(shape[:-1], _nibbles(blocks[..., 2:]), d, d * np.float16(-8), 4)
    if kind == 3:  # Q4_1: d, m, 16 bytes of nibbles; value = d * q + m
        return _affine(shape[:-1], _nibbles(blocks[..., 4:]), _f16(blocks, 0), _f16(blocks, 2), 4)
    if kind == 12:
        q, scales, biases = q4_k_groups(blocks)
        return _affine(shape[:-1], q, scales, biases, 4)
    return _requantized(raw, info)


def _requantized(raw: np.ndarray, info: TensorInfo) -> dict[str, np.ndarray]:
    quants = _gguf_quants()
    if quants is None:
        raise UnsupportedQuantization(_unsupported(info))
    try:
        rows = raw.reshape(*info.shape[:-1], -1)
        values = quants.dequantize(rows, info.ggml_type).astype(np.float32).reshape(info.shape)
    except (NotImplementedError, KeyError, ValueError, TypeError) as exc:
        raise UnsupportedQuantization(_unsupported(info)) from exc
    if values.ndim < 2 or values.shape[-1] % GROUP:
        return {"weight": values.astype(np.float16)}
    return affine_quantize(values, 8)
