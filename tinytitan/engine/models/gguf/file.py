"""Reading a GGUF file: its metadata and where each tensor's bytes lie (no mlx import).

The format (llama.cpp's ``gguf.md``): ``GGUF``, a version (2 or 3), tensor and key counts, the
key/value metadata, one record per tensor (name, dims innermost first, ggml type, offset), then the
tensor data from an aligned offset. Arrays of numbers come back as numpy arrays, arrays of strings
as lists. Tensor bytes are read lazily through a memory map, one tensor at a time.

Not ``gguf.GGUFReader``: it builds a record per element of every array, about 2 s for the embedded
SmolLM2's 49k-token vocabulary against 40 ms here, and ``tinytitan models`` reads every GGUF file it
lists; nor its tables, so that a file of the types decoded here (``quants.EXACT_TYPES``) is read
and converted without the ``gguf`` package. tests/engine/models/gguf/test_file.py holds both to
llama.cpp's: the same records as ``GGUFReader`` reads, the same tables as ``gguf`` has.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ARRAY",
    "GGML_TYPE_NAMES",
    "MAGIC",
    "STRING",
    "VALUE_TYPES",
    "VERSIONS",
    "GGUFError",
    "GGUFFile",
    "TensorInfo",
    "is_gguf",
    "read_gguf",
]

MAGIC = b"GGUF"

GGML_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
    24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0",
    35: "TQ2_0", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0",
}  # fmt: skip

# metadata value types: id -> (struct format, numpy dtype) for the fixed-size ones
VALUE_TYPES = {
    0: ("<B", np.uint8), 1: ("<b", np.int8), 2: ("<H", np.uint16), 3: ("<h", np.int16),
    4: ("<I", np.uint32), 5: ("<i", np.int32), 6: ("<f", np.float32), 7: ("<?", np.bool_),
    10: ("<Q", np.uint64), 11: ("<q", np.int64), 12: ("<d", np.float64),
}  # fmt: skip
STRING, ARRAY = 8, 9
VERSIONS = (2, 3)


class GGUFError(ValueError):
    """The file is not a GGUF file we can read; the message says why."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # numpy order (outermost first): a linear weight is (out, in)
    ggml_type: int
    offset: int  # absolute, in the file

    @property
    def type_name(self) -> str:
        return GGML_TYPE_NAMES.get(self.ggml_type, f"type {self.ggml_type}")


@dataclass
class GGUFFile:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    _map: mmap.mmap | None = None

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def raw(self, info: TensorInfo, nbytes: int) -> np.ndarray:
        """The tensor's bytes (a read-only view of the memory map)."""
        if self._map is None:
            with self.path.open("rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if info.offset + nbytes > len(self._map):
            raise GGUFError(f"{self.path}: tensor {info.name} runs past the end of the file (a partial download?)")
        return np.frombuffer(self._map, dtype=np.uint8, count=nbytes, offset=info.offset)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a decoded view is still alive; the map closes when it goes
                return
            self._map = None


def is_gguf(path: Path) -> bool:
    """A regular file starting with the GGUF magic (Ollama's blobs have no .gguf suffix)."""
    try:
        with path.open("rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class _Cursor:
    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise GGUFError(f"{self.path}: the header is cut short (a partial download?)")
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = self.take("<Q")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item, count = self.take("<I"), self.take("<Q")
            if item == STRING:
                return [self.string() for _ in range(count)]
            if item in VALUE_TYPES:
                dtype = np.dtype(VALUE_TYPES[item][1]).newbyteorder("<")
                out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos).copy()
                self.pos += out.nbytes
                return out
            return [self.value(item) for _ in range(count)]  # arrays of arrays
        if kind in VALUE_TYPES:
            value = self.take(VALUE_TYPES[kind][0])
            return bool(value) if kind == 7 else value
        raise GGUFError(f"{self.path}: unknown metadata value type {kind}")


def read_gguf(path: Path) -> GGUFFile:
    """Parse the header (metadata and tensor records); the tensor data stays on disk."""
    with path.open("rb") as f:
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        cur = _Cursor(buf, path)
        if buf[:4] != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file")
        cur.pos = 4
        version = cur.take("<I")
        if version not in VERSIONS:
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
        n_tensors, n_kv = cur.take("<Q"), cur.take("<Q")
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = cur.string()
            metadata[key] = cur.value(cur.take("<I"))
        records = []
        for _ in range(n_tensors):
            name = cur.string()
            dims = [cur.take("<Q") for _ in range(cur.take("<I"))]
            records.append((name, tuple(reversed(dims)), cur.take("<I"), cur.take("<Q")))
        align = int(metadata.get("general.alignment", 32))
        start = (cur.pos + align - 1) // align * align
        tensors = {n: TensorInfo(n, shape, t, start + off) for n, shape, t, off in records}
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        buf.close()
        if isinstance(exc, GGUFError):
            raise
        raise GGUFError(f"{path}: cannot read the GGUF header ({exc})") from exc
    return GGUFFile(path, version, metadata, tensors, buf)
