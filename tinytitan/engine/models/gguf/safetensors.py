"""Writing numpy arrays as a safetensors file mlx-lm loads, array by array (no copy of the whole shard).

numpy has no bfloat16: an array of ``quants.BF16`` (bfloat16's raw bits) is written as ``BF16``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tinytitan.engine.models.gguf.quants import BF16

__all__ = ["write_safetensors"]

_NAMES = {
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("uint32"): "U32",
    np.dtype("int32"): "I32",
    np.dtype("uint8"): "U8",
    BF16: "BF16",
}


def write_safetensors(path: Path, arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> None:
    """``arrays`` (little-endian, any layout) into a new file at ``path``, with ``metadata``."""
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    offset = 0
    for name, array in arrays.items():
        dtype = _NAMES.get(array.dtype)
        if dtype is None:
            raise ValueError(f"tensor {name}: no safetensors type for {array.dtype}")
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data starts 8-aligned
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for array in arrays.values():
            f.write(np.ascontiguousarray(array).data.cast("B"))
