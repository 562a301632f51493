"""Loading the tokenizer and the weights (issue #3, parts 1 and 7), in the compute dtype
``device/placement.py`` chooses: a quantized checkpoint is dequantized first when it runs in another
dtype (fp32 on the CPU by default).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from tinytitan.engine.device import placement
from tinytitan.engine.device.placement import compute_dtype
from tinytitan.engine.errors import ModelLoadFailed
from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.readiness import progress

__all__ = [
    "draft_source",
    "load_tokenizer",
    "load_vision",
    "load_weights",
    "model_identity",
    "private_arrays",
]

log = logging.getLogger("tinytitan.mlx")


def load_tokenizer(path: Path) -> Any:
    """mlx-lm's ``TokenizerWrapper`` (HF tokenizer + streaming detokenizer + markers + tool parser).

    A tokenizer that cannot be read raises ``ModelLoadFailed`` naming the model and the cause, as
    weights do: one line for the user, never a traceback."""
    from mlx_lm.utils import load_config
    from mlx_lm.utils import load_tokenizer as _load

    progress("loading the tokenizer")
    try:
        eos = load_config(path).get("eos_token_id")
        return _load(path, eos_token_ids=eos)
    except Exception as exc:  # transformers and tokenizers raise many kinds for a bad file
        cause = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) or not str(exc) else str(exc)
        raise ModelLoadFailed(
            f"model '{path.name}' could not be loaded from {path}: its tokenizer could not be read ({cause})"
        ) from exc


def load_weights(
    path: Path, dtype_setting: str, device: str | None = None, name: str | None = None
) -> tuple[Any, dict[str, Any]]:
    """The model (evaluated on ``device``, in its compute dtype) and its config.

    Weights that cannot be read (a file deleted or truncated since startup) raise ``ModelLoadFailed``
    naming the model (``name``, else the directory) and the cause: a 503, never a 500.
    """
    try:
        with placement.device_context(device):
            return _load_weights(path, dtype_setting, device)
    except Exception as exc:  # mlx-lm and safetensors raise many kinds for a bad file
        cause = " ".join((exc.message if isinstance(exc, ModelUnavailable) else str(exc)).split())
        raise ModelLoadFailed(
            f"model '{name or path.name}' could not be loaded from {path}: {cause or type(exc).__name__}"
        ) from exc


def load_vision(vision: Any, dtype_setting: str, device: str | None = None, name: str | None = None) -> Any:
    """A vision-language model's weights through mlx-vlm (``models/mlx/vision.py``), as ``load_weights``."""
    try:
        with placement.device_context(device):
            size = sum(p.stat().st_size for p in vision.path.glob("*.safetensors"))
            progress(f"loading weights ({size / 1e6:.0f} MB, with mlx-vlm)")
            import mlx.core as mx

            model = vision.load(compute_dtype(dtype_setting, device))
            mx.eval(model.vlm.parameters(), private_arrays(model.vlm))
            return model
    except Exception as exc:
        cause = " ".join((exc.message if isinstance(exc, ModelUnavailable) else str(exc)).split())
        raise ModelLoadFailed(
            f"model '{name or vision.path.name}' could not be loaded from {vision.path}: {cause or type(exc).__name__}"
        ) from exc


def _load_weights(path: Path, dtype_setting: str, device: str | None) -> tuple[Any, dict[str, Any]]:
    import mlx.core as mx
    from mlx_lm.utils import dequantize_model, load_model

    target = compute_dtype(dtype_setting, device)
    size = sum(p.stat().st_size for p in path.glob("*.safetensors"))
    progress(f"loading weights ({size / 1e6:.0f} MB{', as ' + target if target else ''})")
    model, config = load_model(path, lazy=True)
    if target is not None:
        model = dequantize_model(model)  # a no-op for an unquantized checkpoint
        model.set_dtype(getattr(mx, target))
        log.debug("running %s in %s", path.name, target)
    mx.eval(model.parameters(), private_arrays(model))
    model.eval()
    return model, config


def private_arrays(model: Any) -> list[Any]:
    """Arrays modules keep outside their parameters (a RoPE's ``_freqs``: Llama 3, Gemma 4, ...).

    They are built lazily on the loading thread, and MLX streams are thread-local: the batch runner,
    on its own thread, could not evaluate them ("There is no Stream(cpu, N) in current thread").
    """
    import mlx.core as mx

    # a module is a dict: names starting with "_" are kept in it but left out of parameters()
    held = [v for m in model.modules() for v in [*m.values(), *vars(m).values()]]
    return [v for v in held if isinstance(v, mx.array)]


def model_identity(path: Path, dtype_setting: str, device: str | None = None, shard: str | None = None) -> str:
    """A digest of what decides a KV cache's contents: config, weight files, compute dtype, MLX.

    Prompt-cache snapshots are keyed by it (in memory and on disk), so a snapshot is never offered
    to another model, another checkpoint of it, another compute dtype or another MLX build. Weight
    files count by name, size and modification time (hashing gigabytes at startup would cost more
    than it protects). ``shard`` names one rank's part of a distributed model (its KV is that rank's
    share only).
    """
    import mlx.core as mx
    import mlx_lm

    weights = sorted(p for p in path.iterdir() if p.suffix == ".safetensors" or p.name.endswith(".index.json"))
    facts = {
        "config": (path / "config.json").read_text(encoding="utf-8"),
        "weights": [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in weights],
        "dtype": compute_dtype(dtype_setting, device) or "native",
        "device": device or "default",
        "mlx": getattr(mx, "__version__", "unknown"),
        "mlx_lm": mlx_lm.__version__,
    }
    if shard is not None:
        facts["shard"] = shard
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def draft_source(name: str, vocab: dict[str, int], served: str) -> Any:
    """The ``--draft-model``'s ``ModelSource``, refused unless its tokenizer's vocabulary is ``vocab``,
    the served model's (the same ids)."""
    from tinytitan.engine.models.mlx.resolve import resolve_model

    try:
        source = resolve_model(name)
    except ModelUnavailable as exc:
        raise ModelUnavailable(f"--draft-model {name}: {exc.message.replace('--model ', '', 1)}") from None
    if load_tokenizer(source.path).get_vocab() != vocab:
        raise ModelUnavailable(
            f"--draft-model {name}: its tokenizer is not {served}'s, so its tokens would mean other "
            "text; give a model of the same family (same tokenizer), or leave --draft-model out"
        )
    return source
