"""A tiny random vision-language model directory, built offline (issue 41; design.md "The tiny real model").

The layout is an Idefics3 (SmolVLM's family) checkpoint as mlx-vlm loads it: a SigLIP-style vision
tower, the pixel-shuffle connector and a Llama-style text model with 1-D RoPE, random weights from a
fixed seed. The processor is a real one: ``preprocessor_config.json`` for transformers'
``Idefics3ImageProcessor`` (64-pixel tiles, images up to 128 pixels split into at most 2 × 2 tiles
plus the global view) and ``processor_config.json`` (4 image tokens a tile), over the tiny text
model's Qwen tokenizer with Idefics3's image tokens added after Qwen3's specials. The chat template
is the tiny model's ChatML one, whose user content may be a list of text and ``image`` entries.

    python -m tinytitan.testing.tiny_model OUT_DIR --vision [--shape tiny]

It answers gibberish, as the text model does; what tests exercise is the path an image takes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tinytitan.paths import cache_root

__all__ = [
    "IMAGE_TOKEN_ID",
    "VISION_SPECIAL_TOKENS",
    "build_vision_model",
    "cached_build",
    "save_model",
    "tiny_vision_dir",
]

_FIRST = 151669  # the first id after Qwen3's added tokens
_GRID = 4  # <row_i_col_j> tokens for tilings up to this many rows and columns
VISION_SPECIAL_TOKENS: tuple[tuple[int, str, bool], ...] = tuple(
    (_FIRST + i, content, True)
    for i, content in enumerate(
        [
            "<fake_token_around_image>",
            "<image>",
            "<end_of_utterance>",
            "<global-img>",
            *(f"<row_{r}_col_{c}>" for r in range(1, _GRID + 1) for c in range(1, _GRID + 1)),
        ]
    )
)
IMAGE_TOKEN_ID = _FIRST + 1
_TEMPLATE = Path(__file__).with_name("vision_chat_template.jinja")

_VISION: dict[str, Any] = {
    "model_type": "idefics3_vision",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "patch_size": 16,
    "image_size": 64,
    "num_channels": 3,
    "layer_norm_eps": 1e-6,
}

_IMAGE_PROCESSOR = {
    "image_processor_type": "Idefics3ImageProcessor",
    "do_convert_rgb": True,
    "do_resize": True,
    "size": {"longest_edge": 128},
    "resample": 1,
    "do_image_splitting": True,
    "max_image_size": {"longest_edge": 64},
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "do_pad": True,
}


def model_config(shape: str, dtype: str) -> dict[str, Any]:
    from tinytitan.testing.tiny_model import SHAPES
    from tinytitan.testing.tiny_model import model_config as text_config

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    text = text_config(shape, dtype)
    text = {
        "model_type": "llama",
        **{k: text[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")},
        **{k: text[k] for k in ("num_key_value_heads", "rms_norm_eps", "rope_theta", "vocab_size")},
        "max_position_embeddings": 8192,
    }
    return {
        "architectures": ["Idefics3ForConditionalGeneration"],
        "model_type": "idefics3",
        "image_token_id": IMAGE_TOKEN_ID,
        "scale_factor": 2,
        "vocab_size": text["vocab_size"],
        "eos_token_id": 151645,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "torch_dtype": dtype,
        "text_config": text,
        "vision_config": _VISION,
    }


def _tokenizer_json(out: Path) -> None:
    """Qwen's vocabulary with Qwen3's specials and Idefics3's image tokens (built once a machine)."""
    from tinytitan.testing.tiny_model import QWEN3_SPECIAL_TOKENS, _key, build_tokenizer_json

    path = cache_root() / "tokenizers" / _key("qwen-vision-tokenizer-json") / "tokenizer.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        build_tokenizer_json(tmp, QWEN3_SPECIAL_TOKENS + VISION_SPECIAL_TOKENS)
        os.replace(tmp, path)
    shutil.copyfile(path, out / "tokenizer.json")


def _write_processor(out: Path) -> None:
    from tinytitan.testing.tiny_model import QWEN3_SPECIAL_TOKENS, _tokenizer_config, added_tokens_decoder

    _tokenizer_json(out)
    config = _tokenizer_config()
    config["added_tokens_decoder"] = added_tokens_decoder(QWEN3_SPECIAL_TOKENS + VISION_SPECIAL_TOKENS)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    shutil.copyfile(_TEMPLATE, out / "chat_template.jinja")
    (out / "preprocessor_config.json").write_text(json.dumps(_IMAGE_PROCESSOR, indent=2), encoding="utf-8")
    processor = {"processor_class": "Idefics3Processor", "image_seq_len": 4}
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2), encoding="utf-8")


def build_vision_model(out: str | Path, *, shape: str = "tiny", dtype: str = "float32") -> Path:
    """Write a loadable Idefics3 directory (random weights, fixed seed) to ``out``; returns it."""
    import mlx.core as mx

    from tinytitan.engine.mlx_vlm_adapter import imported

    imported()
    from mlx_vlm.models import idefics3

    from tinytitan.testing.tiny_model import SEED

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = model_config(shape, dtype)
    mx.random.seed(SEED)
    args = idefics3.ModelConfig.from_dict(config)
    args.text_config = idefics3.TextConfig.from_dict(config["text_config"])
    args.vision_config = idefics3.VisionConfig.from_dict(config["vision_config"])
    model = idefics3.Model(args)
    save_model(out, model, config, dtype)
    _write_processor(out)
    return out


def save_model(out: Path, model: Any, config: dict[str, Any], dtype: str) -> None:
    """A built mlx-vlm ``model`` (random weights) in ``dtype``, its config and generation config, into ``out``."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from tinytitan.testing.tiny_model import _GENERATION_CONFIG

    model.set_dtype(getattr(mx, dtype))
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2), encoding="utf-8")


def tiny_vision_dir(shape: str = "tiny", dtype: str = "float32") -> Path:
    """A cached build (one per machine, keyed by package versions and shape); built on first use."""
    return cached_build("vision", shape, dtype, build_vision_model)


def cached_build(name: str, shape: str, dtype: str, build: Any) -> Path:
    """``build(out, shape=, dtype=)``'s directory, built once a machine (keyed by package versions,
    the template and the shape)."""
    from tinytitan.testing.tiny_model import _key, _version, cached_dir

    key = _key(name, shape, dtype, _version("mlx-vlm"), _TEMPLATE.read_text(encoding="utf-8"))
    path = cache_root() / "models" / f"{name}-{shape}-{dtype}-{key}"
    return cached_dir(path, lambda out: build(out, shape=shape, dtype=dtype))
