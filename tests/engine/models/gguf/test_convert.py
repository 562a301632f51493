"""GGUF files as models: every supported family converts to the same network (issue 12).

Each test builds a small random mlx-lm model with Hugging Face names, writes it as llama.cpp's
converter would (its own name map, q/k permutation, Gemma's ``1 + w`` norms — see
``tinytitan.testing.gguf_files``), converts it back with ``gguf_model_dir`` and compares logits.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten, tree_map

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.gguf.convert import gguf_model_dir
from tinytitan.engine.models.gguf.file import read_gguf
from tinytitan.engine.models.gguf.quants import decode, q4_k_groups, tensor_nbytes
from tinytitan.engine.models.mlx.resolve import resolve_model
from tinytitan.testing.gguf_files import TINY_CONFIG, write_gguf

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker

BASE: dict[str, Any] = TINY_CONFIG
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"tie_word_embeddings": False},
    "llama3-scaled": {
        "model_type": "llama",
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    "qwen2": {},
    "qwen3": {},
    "gemma": {},
    "gemma2": {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 16},
    "gemma3_text": {
        "sliding_window": 4,
        "query_pre_attn_scalar": 16,
        "num_hidden_layers": 6,
        "sliding_window_pattern": 6,
    },
}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYTITAN_CACHE_DIR", str(tmp_path / "cache"))


def _reference(family: str) -> tuple[Any, dict[str, Any]]:
    from tinytitan.engine.mlx_lm_adapter import model_classes

    config = {**BASE, "model_type": family, **FAMILIES[family]}
    model_class, args_class = model_classes(config)
    mx.random.seed(7)
    model = model_class(args_class.from_dict(config))
    model.update(tree_map(lambda p: mx.random.normal(p.shape) * 0.2, model.parameters()))
    mx.eval(model.parameters())
    return model, config


def _logits(model: Any, tokens: list[int]) -> np.ndarray:
    return np.array(model(mx.array([tokens]))[0].astype(mx.float32))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_converts_to_the_same_network(family: str, tmp_path: Path) -> None:
    from mlx_lm.utils import load_model

    model, config = _reference(family)
    path = write_gguf(model, config, tmp_path / f"{family}.gguf")
    converted, _ = load_model(gguf_model_dir(path))
    tokens = [1, 200, 33, 47, 5, 90, 12, 250, 3, 77]
    assert np.allclose(_logits(converted, tokens), _logits(model, tokens), atol=2e-4, rtol=1e-4)


def test_quantized_blocks_keep_their_values(tmp_path: Path) -> None:
    """Q8_0 / Q4_0 weights become MLX affine arrays that dequantize to llama.cpp's own values."""
    import gguf

    model, config = _reference("qwen3")
    for kind in ("Q8_0", "Q4_0"):
        path = write_gguf(model, config, tmp_path / f"{kind}.gguf", quantize=kind)
        file = read_gguf(path)
        info = file.tensors["blk.0.ffn_up.weight"]
        out = decode(file, info)
        bits = out["weight"].shape[-1] * 32 // info.shape[-1]
        weight, scales, biases = (mx.array(out[k]) for k in ("weight", "scales", "biases"))
        ours = mx.dequantize(weight, scales, biases, group_size=32, bits=bits)
        raw = file.raw(info, tensor_nbytes(info))
        theirs = gguf.quants.dequantize(raw.reshape(info.shape[0], -1), gguf.GGMLQuantizationType[kind])
        assert np.allclose(np.array(ours.astype(mx.float32)), theirs, atol=2e-3)
        file.close()


def test_q4_k_decodes_as_llama_cpp_does() -> None:
    import gguf

    rng = np.random.default_rng(3)
    blocks = rng.integers(0, 256, (6, 144), dtype=np.uint8)
    blocks[:, 0:2] = np.frombuffer(np.float16(0.02).tobytes(), np.uint8)
    blocks[:, 2:4] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    q, scales, mins = q4_k_groups(blocks)
    ours = (q.reshape(6, 8, 32) * scales[..., None] + mins[..., None]).reshape(6, 256)
    theirs = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.Q4_K)
    assert np.allclose(ours, theirs, atol=1e-6)


def test_resolve_serves_a_gguf_file_and_caches_the_conversion(tmp_path: Path) -> None:
    model, config = _reference("qwen2")
    path = write_gguf(model, config, tmp_path / "Small-Model.Q8_0.gguf", template="{{ messages }}")
    first = resolve_model(str(path))
    assert first.model_id == "Small-Model.Q8_0" and first.gguf == path.resolve()
    assert (first.path / "config.json").exists() and (first.path / "tokenizer.json").exists()
    stamp = (first.path / "config.json").stat().st_mtime_ns
    time.sleep(0.01)
    again = resolve_model(str(path), "alias")
    assert again.path == first.path and again.model_id == "alias"
    assert (again.path / "config.json").stat().st_mtime_ns == stamp  # not converted twice
    assert not [p for p in again.path.parent.iterdir() if p.name.startswith(".convert-")]


def test_an_ollama_blob_needs_no_suffix_and_gets_its_own_name(tmp_path: Path) -> None:
    model, config = _reference("qwen3")
    blob = write_gguf(model, config, tmp_path / ("sha256-" + "ab" * 32))
    source = resolve_model(str(blob))
    assert source.model_id == "test-qwen3"


def test_unsupported_architecture_is_one_clear_error(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "phi.gguf"
    writer = gguf.GGUFWriter(str(path), "phi2")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelUnavailable, match=r"GGUF architecture 'phi2' is not supported; supported: llama"):
        resolve_model(str(path))


def test_unsupported_quantization_names_the_type_and_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    import gguf

    model, config = _reference("llama")
    path = write_gguf(model, config, tmp_path / "k.gguf", quantize="Q5_0")
    real_import = builtins.__import__

    def no_gguf(name: str, *args: Any, **kwargs: Any) -> Any:  # as on a machine without the package
        if name == "gguf" or name.startswith("gguf."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_gguf)
    with pytest.raises(ModelUnavailable, match=r"quantization type Q5_0 \(tensor [\w.]+\) is not supported"):
        resolve_model(str(path))
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert gguf  # with the package, the same file converts (dequantized, requantized to 8 bits)
    assert (resolve_model(str(path)).path / "config.json").exists()


def test_a_requantized_type_keeps_llama_cpps_values_within_an_8_bit_step(tmp_path: Path) -> None:
    """Q5_0 (no exact MLX form): dequantized by llama.cpp's package, requantized to MLX 8-bit in numpy
    with mx.quantize's own rule (the same arrays), so it dequantizes to the file's values within a step."""
    import gguf

    model, config = _reference("qwen3")
    path = write_gguf(model, config, tmp_path / "q5.gguf", quantize="Q5_0")
    file = read_gguf(path)
    try:
        info = file.tensors["blk.0.ffn_up.weight"]
        out = decode(file, info)
        raw = file.raw(info, tensor_nbytes(info))
        theirs = gguf.quants.dequantize(raw.reshape(info.shape[0], -1), gguf.GGMLQuantizationType.Q5_0)
    finally:
        file.close()
    weight, scales, biases = mx.quantize(mx.array(theirs.astype(np.float32)), group_size=32, bits=8)
    assert np.array_equal(out["weight"], np.array(weight))
    assert np.array_equal(out["scales"], np.array(scales.astype(mx.float16)))
    assert np.array_equal(out["biases"], np.array(biases.astype(mx.float16)))
    step = np.abs(theirs).max() * 2 / 255
    weight8, scales8, biases8 = (mx.array(out[k]) for k in ("weight", "scales", "biases"))
    ours = mx.dequantize(weight8, scales8, biases8, group_size=32, bits=8)
    assert np.abs(np.array(ours) - theirs).max() <= step


def test_a_conversion_never_calls_mlx(tmp_path: Path) -> None:
    """It runs on whatever thread needs the model while the device worker serves another one: with the
    device check on (the suite's), any MLX call off a device thread would raise."""
    import threading

    from tinytitan.engine.device import thread as device_thread

    model, config = _reference("qwen3")
    path = write_gguf(model, config, tmp_path / "plain.gguf", quantize="Q4_0")
    assert device_thread.check_installed()
    done: list[Path] = []
    worker = threading.Thread(target=lambda: done.append(gguf_model_dir(path)), name="not-the-device")
    worker.start()
    worker.join()
    assert done and (done[0] / "config.json").exists()


def test_a_truncated_file_is_refused_cleanly(tmp_path: Path) -> None:
    model, config = _reference("qwen3")
    path = write_gguf(model, config, tmp_path / "full.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: os.path.getsize(path) // 2])
    with pytest.raises(ModelUnavailable, match="runs past the end of the file"):
        resolve_model(str(cut))


def test_converted_tensors_have_mlx_lm_names(tmp_path: Path) -> None:
    model, config = _reference("gemma2")
    directory = gguf_model_dir(write_gguf(model, config, tmp_path / "g.gguf"))
    saved = mx.load(str(next(directory.glob("model-*.safetensors"))))
    params = tree_flatten(model.parameters())
    assert isinstance(params, list)  # (path, array) pairs
    assert set(saved) == {k for k, _ in params}


def test_a_type_nothing_decodes_is_named() -> None:
    from tinytitan.engine.models.gguf.file import TensorInfo
    from tinytitan.engine.models.gguf.quants import UnsupportedQuantization

    with pytest.raises(UnsupportedQuantization, match=r"type 77 \(tensor blk.0.attn_q.weight\) is not supported"):
        tensor_nbytes(TensorInfo("blk.0.attn_q.weight", (64, 64), 77, 0))
