"""A tiny random Qwen2.5-VL directory, built offline (issue 41): the M-RoPE family.

The layout mlx-vlm's ``qwen2_5_vl`` loads: a one-block windowed ViT (14-pixel patches, 2 × 2 merge,
two frames a temporal patch) and a Qwen2-style text model whose rotary positions are 3-D (M-RoPE,
``mrope_section`` over the tiny head), random weights from a fixed seed. The processor is a real
one: transformers' ``Qwen2VLImageProcessor`` with a small pixel budget (an image becomes 4 to 16
image tokens), over the tiny text model's Qwen tokenizer, whose specials already hold Qwen's
``<|vision_start|>``, ``<|image_pad|>`` and ``<|vision_end|>``. The chat template is the tiny
vision model's, an image written as Qwen's ``<|vision_start|><|image_pad|><|vision_end|>``.

    python -m tinytitan.testing.tiny_model OUT_DIR --vision --family qwen2.5-vl
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tinytitan.testing.tiny_vision import cached_build

__all__ = ["IMAGE_PAD_ID", "build_qwen_vl_model", "tiny_qwen_vl_dir"]

IMAGE_PAD_ID = 151655  # <|image_pad|>
_TEMPLATE = Path(__file__).with_name("vision_chat_template.jinja")
_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"

_VISION: dict[str, Any] = {
    "model_type": "qwen2_5_vl",
    "depth": 1,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "patch_size": 14,
    "spatial_patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 56,
    "fullatt_block_indexes": [0],
    "in_channels": 3,
}

_IMAGE_PROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "do_convert_rgb": True,
    "do_resize": True,
    "min_pixels": 56 * 56,
    "max_pixels": 112 * 112,
    "patch_size": 14,
    "merge_size": 2,
    "temporal_patch_size": 2,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}


def model_config(shape: str, dtype: str) -> dict[str, Any]:
    from tinytitan.testing.tiny_model import SHAPES
    from tinytitan.testing.tiny_model import model_config as text_config

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    text = text_config(shape, dtype)
    head = text["hidden_size"] // text["num_attention_heads"]  # mlx-vlm's Qwen2 attention reads no head_dim
    half = head // 2
    section = [half - 2 * (half // 3), half // 3, half // 3]
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        **{k: text[k] for k in (*keys, "rms_norm_eps", "rope_theta", "vocab_size")},
        "max_position_embeddings": 8192,
        "rope_scaling": {"type": "mrope", "mrope_section": section},
        "tie_word_embeddings": True,
        "image_token_id": IMAGE_PAD_ID,
        "video_token_id": 151656,
        "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "eos_token_id": 151645,
        "torch_dtype": dtype,
        "vision_config": {**_VISION, "out_hidden_size": text["hidden_size"]},
    }


def _write_processor(out: Path) -> None:
    from tinytitan.testing.tiny_model import (
        QWEN3_SPECIAL_TOKENS,
        _cached_tokenizer_json,
        _tokenizer_config,
        added_tokens_decoder,
    )

    (out / "tokenizer.json").write_bytes(_cached_tokenizer_json().read_bytes())
    config = _tokenizer_config()
    config["added_tokens_decoder"] = added_tokens_decoder(QWEN3_SPECIAL_TOKENS)
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    template = _TEMPLATE.read_text(encoding="utf-8").replace("'<image>'", repr(_IMAGE))
    (out / "chat_template.jinja").write_text(template, encoding="utf-8")
    (out / "preprocessor_config.json").write_text(json.dumps(_IMAGE_PROCESSOR, indent=2), encoding="utf-8")
    (out / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen2_5_VLProcessor"}), encoding="utf-8")


def build_qwen_vl_model(out: str | Path, *, shape: str = "tiny", dtype: str = "float32") -> Path:
    """Write a loadable Qwen2.5-VL directory (random weights, fixed seed) to ``out``; returns it."""
    import mlx.core as mx

    from tinytitan.engine.mlx_vlm_adapter import imported

    imported()
    from mlx_vlm.models import qwen2_5_vl

    from tinytitan.testing.tiny_model import SEED
    from tinytitan.testing.tiny_vision import save_model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = model_config(shape, dtype)
    mx.random.seed(SEED)
    args = qwen2_5_vl.ModelConfig.from_dict(json.loads(json.dumps(config)))
    args.text_config = qwen2_5_vl.TextConfig.from_dict(args.text_config)
    args.vision_config = qwen2_5_vl.VisionConfig.from_dict(config["vision_config"])
    model = qwen2_5_vl.Model(args)
    save_model(out, model, config, dtype)
    _write_processor(out)
    return out


def tiny_qwen_vl_dir(shape: str = "tiny", dtype: str = "float32") -> Path:
    """A cached build (one per machine, keyed by package versions and shape); built on first use."""
    return cached_build("qwen-vl", shape, dtype, build_qwen_vl_model)
