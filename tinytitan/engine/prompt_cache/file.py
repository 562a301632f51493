"""One block of a KV prefix on disk: a safetensors file written atomically and checked on read.

A block holds the keys and values of ``BLOCK`` consecutive tokens for every layer, each tensor shaped
``(1, heads, tokens, last)`` so any safetensors reader can open it: ``k.<layer>`` and ``v.<layer>`` in
full precision, or — a quantized KV cache (``--kv-bits``) — the packed uint32 words ``k.<layer>``
and ``v.<layer>`` with their scales ``ks`` / ``vs`` and biases ``kb`` / ``vb``, as ``mx.quantize``
makes them (``layers.py``). The header metadata says what the block is — format and version, the
model identity, the digest of the prefix before it (``parent``), its index in the chain, its token
ids (base64 of little-endian uint32), a CRC-32 of the tensor bytes, and for a quantized block its
``kv_bits`` and ``kv_group_size``.

Writing: the bytes go to a temporary file in the same directory (owner-only, ``O_EXCL``), are
fsynced, then renamed over the final name and the directory is fsynced — a crash leaves either no
file or a whole one, never one that loads wrong. Reading checks the header, the sizes and the CRC;
any mismatch raises ``BadBlock`` with a reason (the tier logs it and ignores the file).

Pure numpy + stdlib: no mlx here, so the writer thread never touches MLX.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMAT",
    "FULL",
    "QUANTIZED",
    "SUFFIX",
    "VERSION",
    "BadBlock",
    "BlockHeader",
    "Layer",
    "drop_abandoned",
    "read_block",
    "read_header",
    "write_block",
]

FORMAT = "tinytitan-kv"
VERSION = 2  # bump when the layout or the meaning of a field changes: old files are then ignored (2: quantized)
SUFFIX = ".ttkv"
MAX_HEADER = 16 * 2**20
STALE_TMP = 3600.0  # seconds after which a temporary file of a live process counts as abandoned

# safetensors dtype names; bfloat16 travels as its raw 16-bit pattern; U32: a quantized block's packed words
_DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "U32": np.dtype("<u4"),
}
FULL = ("k", "v")  # a layer's tensors in full precision
QUANTIZED = ("k", "ks", "kb", "v", "vs", "vb")  # … quantized: packed words, scales, biases
PACKED = ("k", "v")  # … of which these are packed uint32 words in a quantized block

Layer = dict[str, np.ndarray]  # one layer's tensors by role (FULL or QUANTIZED)


class BadBlock(Exception):
    """A block file that must not be loaded; the message says why."""


@dataclass(frozen=True, slots=True)
class BlockHeader:
    model: str
    version: int
    parent: str
    index: int
    tokens: tuple[int, ...]
    dtype: str  # the safetensors dtype of the keys and values (F32, F16, BF16), or of the scales and biases
    layers: int
    data_bytes: int
    crc: int
    header_bytes: int
    tensors: dict[str, tuple[tuple[int, ...], int, int, str]]  # name -> (shape, start, end, dtype) in the data
    bits: int | None = None  # a quantized block's bits per element
    group_size: int | None = None  # … and elements per scale and bias

    @property
    def roles(self) -> tuple[str, ...]:
        return FULL if self.bits is None else QUANTIZED

    @property
    def file_bytes(self) -> int:
        return 8 + self.header_bytes + self.data_bytes


def _encode_tokens(tokens: tuple[int, ...]) -> str:
    return base64.b64encode(np.asarray(tokens, dtype="<u4").tobytes()).decode("ascii")


def _decode_tokens(text: str) -> tuple[int, ...]:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 4:
        raise ValueError("token bytes are not whole uint32s")
    return tuple(int(t) for t in np.frombuffer(raw, dtype="<u4"))


def write_block(
    path: Path,
    *,
    model: str,
    parent: str,
    index: int,
    tokens: tuple[int, ...],
    dtype: str,
    layers: list[Layer],
    bits: int | None = None,
    group_size: int | None = None,
) -> int:
    """Write one block atomically (temp + fsync + rename); returns the file's size in bytes.
    ``layers``: each layer's tensors by role; ``bits`` and ``group_size`` for a quantized block."""
    roles = FULL if bits is None else QUANTIZED
    tensors: dict[str, np.ndarray] = {}
    for i, layer in enumerate(layers):
        for role in roles:
            tensors[f"{role}.{i}"] = np.ascontiguousarray(layer[role])
    crc = 0
    entries: dict[str, object] = {}
    offset = 0
    for name, array in tensors.items():
        crc = zlib.crc32(array.data.cast("B"), crc)  # contiguous (above)
        kind = "U32" if bits is not None and name.split(".")[0] in PACKED else dtype
        entries[name] = {"dtype": kind, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    quantized = {} if bits is None else {"kv_bits": str(bits), "kv_group_size": str(group_size)}
    entries["__metadata__"] = {
        "format": FORMAT,
        "version": str(VERSION),
        "model": model,
        "parent": parent,
        "index": str(index),
        "tokens": _encode_tokens(tokens),
        "crc32": str(crc),
        "layers": str(len(layers)),
        **quantized,
    }
    header = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    header += b" " * (-len(header) % 8)  # safetensors aligns the data to 8 bytes
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(header)))
            f.write(header)
            for array in tensors.values():
                f.write(array.data.cast("B"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return 8 + len(header) + offset


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _parse_header(raw: bytes, header_bytes: int) -> BlockHeader:
    try:
        entries = json.loads(raw.decode("utf-8"))
        meta = entries.pop("__metadata__")
        if meta.get("format") != FORMAT:
            raise BadBlock("not a tinytitan KV block")
        version = int(meta["version"])
        tensors: dict[str, tuple[tuple[int, ...], int, int, str]] = {}
        dtypes = set()
        bits = int(meta["kv_bits"]) if "kv_bits" in meta else None
        for name, spec in entries.items():
            start, end = (int(x) for x in spec["data_offsets"])
            tensors[name] = (tuple(int(d) for d in spec["shape"]), start, end, str(spec["dtype"]))
            if bits is None or name.split(".")[0] not in PACKED:
                dtypes.add(spec["dtype"])
        header = BlockHeader(
            model=str(meta["model"]),
            version=version,
            parent=str(meta["parent"]),
            index=int(meta["index"]),
            tokens=_decode_tokens(meta["tokens"]),
            dtype=dtypes.pop() if len(dtypes) == 1 else "?",
            layers=int(meta["layers"]),
            data_bytes=max((end for _s, _a, end, _d in tensors.values()), default=0),
            crc=int(meta["crc32"]),
            header_bytes=header_bytes,
            tensors=tensors,
            bits=bits,
            group_size=int(meta["kv_group_size"]) if bits is not None else None,
        )
    except BadBlock:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadBlock(f"unreadable header ({exc.__class__.__name__}: {exc})") from None
    if header.version == VERSION:
        _check_layout(header)
    return header


def _check_layout(header: BlockHeader) -> None:
    if header.dtype not in _DTYPES or header.dtype == "U32":
        raise BadBlock(f"unsupported dtype {header.dtype!r}")
    if header.bits is not None and (header.bits not in (4, 8) or header.group_size not in (32, 64, 128)):
        raise BadBlock(f"unsupported quantization ({header.bits} bits, groups of {header.group_size})")
    if set(header.tensors) != {f"{role}.{i}" for i in range(header.layers) for role in header.roles}:
        raise BadBlock("the tensors do not match the layer count")
    n = len(header.tokens)
    for name, (shape, start, end, kind) in header.tensors.items():
        packed = header.bits is not None and name.split(".")[0] in PACKED
        if kind != ("U32" if packed else header.dtype):
            raise BadBlock(f"tensor {name} is {kind}")
        size = _DTYPES[kind].itemsize
        if len(shape) != 4 or shape[0] != 1 or shape[2] != n or end - start != size * int(np.prod(shape)):
            raise BadBlock(f"tensor {name} has shape {list(shape)} for {n} tokens")
    if header.bits is not None and header.group_size is not None:
        for i in range(header.layers):
            for kv in PACKED:
                words, scales = header.tensors[f"{kv}.{i}"][0][3], header.tensors[f"{kv}s.{i}"][0][3]
                if words * 32 != scales * header.group_size * header.bits:
                    raise BadBlock(f"tensor {kv}.{i}'s scales do not match its words")


def read_header(path: Path) -> BlockHeader:
    """The header of a block file, checked against the file's size (no tensor data read)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise BadBlock("truncated (no header)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise BadBlock("header too large")
        raw = f.read(n)
        if len(raw) != n:
            raise BadBlock("truncated header")
        header = _parse_header(raw, n)
        size = os.fstat(f.fileno()).st_size
    if header.version == VERSION and size != header.file_bytes:
        raise BadBlock(f"size {size} bytes, header says {header.file_bytes}")
    return header


def read_block(path: Path) -> tuple[BlockHeader, list[Layer]]:
    """The header and every layer's tensors by role, after checking sizes and the CRC."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise BadBlock("truncated (no header)")
    (n,) = struct.unpack_from("<Q", data)
    if n > MAX_HEADER or 8 + n > len(data):
        raise BadBlock("truncated header")
    header = _parse_header(data[8 : 8 + n], n)
    if header.version != VERSION:
        raise BadBlock(f"format version {header.version}, this server reads {VERSION}")
    if len(data) != header.file_bytes:
        raise BadBlock(f"size {len(data)} bytes, header says {header.file_bytes}")
    body = memoryview(data)[8 + n :]
    if zlib.crc32(body) != header.crc:
        raise BadBlock("checksum mismatch")

    def tensor(name: str) -> np.ndarray:
        shape, start, end, kind = header.tensors[name]
        array: np.ndarray = np.frombuffer(body[start:end], dtype=_DTYPES[kind]).reshape(shape)
        return array

    return header, [{role: tensor(f"{role}.{i}") for role in header.roles} for i in range(header.layers)]


def drop_abandoned(path: Path) -> None:
    """Remove a writer's temporary file (``.NAME.PID.tmp``) when its process is gone or it is long abandoned."""
    try:
        pid = int(path.name.rsplit(".", 2)[-2])
        age = time.time() - path.stat().st_mtime
    except (ValueError, IndexError, OSError):
        return
    alive = True
    if pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            alive = False
        except PermissionError:
            pass
    if not alive or age > STALE_TMP:
        path.unlink(missing_ok=True)
