"""What an MLX model directory is, read from its files without loading weights or the tokenizer.

``read_facts`` is what the backend and the catalog both need before anything loads: the served
``ModelInfo`` (context window, sampling defaults, reasoning levels, whether a tool call can be
forced) and the chat template. ``check_loadable`` refuses a directory mlx-lm could not load
(no weights, no tokenizer, an architecture mlx-lm lacks) with a one-line reason. ``describe`` adds
what a person choosing a model wants to see: architecture, parameters (from the safetensors
headers — a few KB read per file), quantization and size on disk.

No weights load here; the tool-call syntax is mlx-lm's own inference (``syntax.tool_syntax``),
which imports mlx-lm (about a second, once) but loads nothing.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinytitan.engine.models.files import ModelUnavailable, context_window, read_json, sampling_defaults
from tinytitan.engine.models.mlx.syntax import FORCEABLE, tool_syntax
from tinytitan.engine.models.mlx.template import read_levels, read_template
from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.defaults import model_defaults

__all__ = ["Description", "Facts", "check_loadable", "describe", "read_facts", "safetensors_params", "size_on_disk"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
_DTYPE_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}
_HEADER_LIMIT = 100 * 2**20  # a safetensors header bigger than this is not one


@dataclass(frozen=True, slots=True)
class Facts:
    """The facts serving needs, read without weights or tokenizer."""

    path: Path
    config: dict[str, Any]
    template: str
    syntax: str | None  # the tool-call syntax (``harmony``, an mlx-lm parser's name), None: no tools
    info: ModelInfo


@dataclass(frozen=True, slots=True)
class Description:
    """The facts a person compares models by (``tinytitan models``)."""

    architecture: str
    parameters: int | None
    quantization: str
    size_bytes: int
    tool_call_family: str | None


def _names(path: Path) -> list[str]:
    """What the publisher table may know the model by: its directory, its config's source name, and
    for a converted GGUF file the file's own name and metadata name (never the served id: an alias)."""
    names = [path.name, str(read_json(path / "config.json").get("_name_or_path") or "")]
    source = read_json(path / "tinytitan-gguf.json")
    return [*names, Path(str(source.get("gguf") or "")).name, str(source.get("name") or "")]


def read_facts(path: Path, model_id: str, max_context: int | None = None) -> Facts:
    """Config, template and ``ModelInfo`` of the model in ``path``; ``ModelUnavailable`` if unusable."""
    config = read_json(path / "config.json")
    template = read_template(path)
    levels = read_levels(path, template)
    syntax = tool_syntax(path, template)
    generation_config = sampling_defaults(read_json(path / "generation_config.json"))
    defaults, defaults_from = model_defaults(generation_config, _names(path))
    info = ModelInfo(
        id=model_id,
        context_window=context_window(config, max_context),
        defaults=defaults,
        defaults_from=defaults_from,
        reasoning_levels=levels.levels,
        default_reasoning=levels.default,
        forced_tool_calls=syntax in FORCEABLE,
        freeform_grammars=syntax in FORCEABLE,  # a custom tool's input grammar sits in a call grammar
        tool_calls=syntax is not None,
        vision=isinstance(config.get("vision_config"), dict),  # a vision-language checkpoint (mlx-vlm)
    )
    return Facts(path, config, template, syntax, info)


MLX_LM_MISSING = (
    "mlx-lm is not installed, so no model can be loaded: pip install 'tinytitan[mlx]' "
    "('tinytitan[mlx,cpu]' on Linux), or serve a --stub script"
)


def _architecture_supported(model_type: str) -> bool:
    """Whether mlx-lm has a module for this ``model_type`` (found on disk; mlx is not imported)."""
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        return False
    models = Path(next(iter(spec.submodule_search_locations))) / "models"
    if (models / f"{model_type}.py").exists():
        return True
    from mlx_lm.utils import MODEL_REMAPPING  # rare: a remapped family (mistral → llama); imports mlx

    return (models / f"{MODEL_REMAPPING.get(model_type, model_type)}.py").exists()


def check_loadable(path: Path) -> None:
    """Raise ``ModelUnavailable`` with a one-line reason unless mlx-lm could load ``path``.

    Checks the files (config, architecture, weights, tokenizer, chat template) and that each weight
    file is as long as its header says (a half-finished download), never reading the weights
    themselves: a corrupt file still fails at load time, where the error names it.
    """
    if not (path / "config.json").is_file():
        raise ModelUnavailable("no config.json")
    config = read_json(path / "config.json")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelUnavailable("config.json names no model_type")
    if importlib.util.find_spec("mlx_lm") is None:  # the mlx extra is missing: no architecture is supported
        raise ModelUnavailable(MLX_LM_MISSING)
    if isinstance(config.get("vision_config"), dict):
        from tinytitan.engine.models.mlx.vision import Vision

        Vision.of(path, config)  # mlx-vlm installed, and a family it serves
    elif not _architecture_supported(model_type):
        raise ModelUnavailable(f"architecture '{model_type}' is not supported by mlx-lm")
    _check_weights(path)
    if not any((path / name).is_file() for name in _TOKENIZER_FILES):
        raise ModelUnavailable("no tokenizer (tokenizer.json or tokenizer.model)")
    read_template(path)


def _check_weights(path: Path) -> None:
    """Every weight file there and complete: those an index names, each as long as its header says."""
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ModelUnavailable("no .safetensors weights (an unfinished download?)")
    index = path / "model.safetensors.index.json"
    named = read_json(index).get("weight_map", {}) if index.is_file() else {}
    missing = sorted({str(f) for f in (named.values() if isinstance(named, dict) else ())} - {f.name for f in files})
    if missing:
        raise ModelUnavailable(f"{missing[0]} is missing ({index.name} names {len(missing)} absent file(s))")
    for file in files:
        size = file.stat().st_size
        header = _header(file)
        ends = [int(v["data_offsets"][1]) for v in header.values() if isinstance(v, dict) and "data_offsets" in v]
        if not header:
            raise ModelUnavailable(f"{file.name} is not a complete safetensors file ({size} bytes)")
        with file.open("rb") as fh:
            (header_size,) = struct.unpack("<Q", fh.read(8))
        needed = 8 + header_size + max(ends, default=0)
        if size < needed:
            raise ModelUnavailable(
                f"{file.name} is truncated ({size / 1e6:.1f} of {needed / 1e6:.1f} MB; an interrupted download?)"
            )


def _header(file: Path) -> dict[str, Any]:
    with file.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            return {}
        (size,) = struct.unpack("<Q", raw)
        if size > _HEADER_LIMIT:
            return {}
        try:
            header = json.loads(fh.read(size))
        except ValueError:
            return {}
    return header if isinstance(header, dict) else {}


def _numel(shape: list[int]) -> int:
    n = 1
    for dim in shape:
        n *= int(dim)
    return n


def safetensors_params(path: Path, config: dict[str, Any]) -> tuple[int | None, str | None]:
    """(parameter count, dominant float dtype) from the safetensors headers in ``path``.

    A quantized layer (``X.weight`` packed in uint32 beside ``X.scales``) counts its logical
    weights: ``scales`` columns × group size per row; its ``scales`` / ``biases`` are not parameters.
    """
    tensors: dict[str, dict[str, Any]] = {}
    for file in sorted(path.glob("*.safetensors")):
        try:
            tensors.update({k: v for k, v in _header(file).items() if k != "__metadata__" and isinstance(v, dict)})
        except OSError:
            return None, None
    if not tensors:
        return None, None
    declared = config.get("quantization")
    quant: dict[str, Any] = declared if isinstance(declared, dict) else {}
    total = 0
    dtypes: Counter[str] = Counter()
    for name, meta in tensors.items():
        shape = meta.get("shape") or []
        prefix, _, leaf = name.rpartition(".")
        quantized = f"{prefix}.scales" in tensors and f"{prefix}.weight" in tensors
        if quantized and leaf in ("scales", "biases"):
            continue  # quantization overhead, not parameters
        if quantized and leaf == "weight":
            own = quant.get(prefix)
            layer: dict[str, Any] = own if isinstance(own, dict) else quant
            group = int(layer.get("group_size", 64))
            scales = tensors[f"{prefix}.scales"].get("shape") or [0]
            total += _numel(shape[:-1]) * int(scales[-1]) * group
            continue
        n = _numel(shape)
        total += n
        dtypes[str(meta.get("dtype"))] += n
    dominant = max(dtypes, key=lambda d: dtypes[d]) if dtypes else None
    return total, _DTYPE_NAMES.get(dominant or "", (dominant or "").lower() or None)


def _quantization(config: dict[str, Any], dtype: str | None) -> str:
    for key in ("quantization", "quantization_config"):
        quant = config.get(key)
        if isinstance(quant, dict) and isinstance(quant.get("bits"), int):
            mode = quant.get("mode") or quant.get("quant_method")
            suffix = f" {mode}" if isinstance(mode, str) and mode not in ("affine", "mlx") else ""
            return f"{quant['bits']}-bit{suffix}"
    return dtype or str(config.get("torch_dtype") or config.get("dtype") or "unknown")


def _architecture(config: dict[str, Any]) -> str:
    model_type = config.get("model_type")
    return model_type if isinstance(model_type, str) and model_type else "unknown"


def size_on_disk(path: Path) -> int:
    """Bytes of the files in ``path`` (symlinks followed: a hub snapshot links into its blobs)."""
    total = 0
    for file in path.rglob("*"):
        try:
            if file.is_file():
                total += file.stat().st_size
        except OSError:
            continue
    return total


def describe(facts: Facts) -> Description:
    params, dtype = safetensors_params(facts.path, facts.config)
    return Description(
        architecture=_architecture(facts.config),
        parameters=params,
        quantization=_quantization(facts.config, dtype),
        size_bytes=size_on_disk(facts.path),
        tool_call_family=facts.syntax,
    )
