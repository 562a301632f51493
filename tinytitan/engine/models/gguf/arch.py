"""GGUF architectures → mlx-lm: the ``config.json`` and the tensor names (no mlx import).

Supported: ``llama`` (Llama 2/3, Mistral, SmolLM and other llama-architecture files), ``qwen2``,
``qwen3``, ``gemma``, ``gemma2`` and ``gemma3`` (text). What differs from a Hugging Face checkpoint:
- llama.cpp's converter permutes the q/k rows of ``llama`` files for its interleaved rotary layout;
  ``rope_traditional: true`` makes mlx-lm rotate the same pairs (attention scores are unchanged).
  The other families keep the Hugging Face layout.
- Gemma's norms are stored as ``1 + w`` (llama.cpp folds in the ``1 +`` Gemma applies at run time);
  the caller subtracts 1 again (``norm_offset``).
- Llama 3's frequency scaling is stored as a ``rope_freqs`` tensor rather than as parameters: the
  parameters are recovered from it (the standard low/high frequency factors) and checked.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinytitan.engine.models.gguf.file import GGUFFile

__all__ = ["ARCHITECTURES", "UnsupportedArchitecture", "mlx_config", "mlx_name", "norm_offset"]

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3")
_MODEL_TYPE = {"gemma3": "gemma3_text"}
_GEMMA = ("gemma", "gemma2", "gemma3")

_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GEMMA2_BLOCK = {  # Gemma 2/3 have four norms per block
    **_BLOCK,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_DROPPED = ("rope_freqs",)  # folded into the config


class UnsupportedArchitecture(ValueError):
    """An architecture (or a feature of one) mlx-lm cannot run from this file; the message names it."""


def mlx_name(arch: str, name: str) -> str | None:
    """The mlx-lm parameter name for a GGUF tensor name (None: not a parameter, e.g. rope_freqs)."""
    stem, _, suffix = name.rpartition(".")
    if stem in _DROPPED:
        return None
    if stem in _TOP:
        return f"{_TOP[stem]}.{suffix}"
    parts = stem.split(".")
    table = _GEMMA2_BLOCK if arch in ("gemma2", "gemma3") else _BLOCK
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in table:
        return f"model.layers.{parts[1]}.{table[parts[2]]}.{suffix}"
    raise UnsupportedArchitecture(f"GGUF tensor {name} has no counterpart in mlx-lm's {arch} model")


def norm_offset(arch: str, name: str) -> float:
    """What to add to a tensor after loading: -1 for Gemma's norm weights, else 0."""
    return -1.0 if arch in _GEMMA and name.endswith("norm.weight") else 0.0


def _scalar(gguf: GGUFFile, key: str, default: Any = None) -> Any:
    value = gguf.get(key, default)
    if isinstance(value, np.ndarray):  # per-layer values (e.g. head_count_kv): one value for all layers
        if value.size == 0 or not (value == value.flat[0]).all():
            raise UnsupportedArchitecture(f"GGUF key {key} varies per layer, which mlx-lm's model does not support")
        value = value.flat[0].item()
    return value


def mlx_config(gguf: GGUFFile, vocab_size: int) -> dict[str, Any]:
    """A ``config.json`` mlx-lm builds the model from."""
    arch = gguf.architecture
    if arch not in ARCHITECTURES:
        raise UnsupportedArchitecture(
            f"GGUF architecture '{arch or '?'}' is not supported; supported: {', '.join(ARCHITECTURES)}"
        )

    def key(name: str, default: Any = None) -> Any:
        return _scalar(gguf, f"{arch}.{name}", default)

    hidden, heads = int(key("embedding_length")), int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", hidden // heads))
    config: dict[str, Any] = {
        "model_type": _MODEL_TYPE.get(arch, arch),
        "hidden_size": hidden,
        "num_hidden_layers": int(key("block_count")),
        "intermediate_size": int(key("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon", 1e-6)),
        "vocab_size": vocab_size,
        "max_position_embeddings": int(key("context_length", 4096)),
        "rope_theta": float(key("rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in gguf.tensors,
        "quantization": {"group_size": 32, "bits": 4},  # per layer, the saved arrays decide
    }
    if arch == "llama":
        config["rope_traditional"] = True
        config["attention_bias"] = "blk.0.attn_q.bias" in gguf.tensors
        config["mlp_bias"] = "blk.0.ffn_up.bias" in gguf.tensors
    scaling = _rope_scaling(gguf, arch, head_dim, config["rope_theta"])
    if scaling:
        config["rope_scaling"] = scaling
    if arch in ("gemma2", "gemma3"):
        big = config["num_hidden_layers"] in (46, 62)  # the 27B shapes scale queries by hidden / heads
        config["query_pre_attn_scalar"] = hidden // heads if big else head_dim
    if arch == "gemma2":
        config["attn_logit_softcapping"] = float(key("attn_logit_softcapping", 50.0))
        config["final_logit_softcapping"] = float(key("final_logit_softcapping", 30.0))
    if arch == "gemma3":
        config["sliding_window"] = int(key("attention.sliding_window", 512))
        config["sliding_window_pattern"] = 6
        config["rope_local_base_freq"] = 10000.0
    return config


def _rope_scaling(gguf: GGUFFile, arch: str, head_dim: int, theta: float) -> dict[str, Any] | None:
    kind = gguf.get(f"{arch}.rope.scaling.type")
    factor = gguf.get(f"{arch}.rope.scaling.factor")
    if kind == "linear" and factor:
        return {"type": "linear", "factor": float(factor)}
    if kind not in (None, "none", "linear"):
        raise UnsupportedArchitecture(f"GGUF rope scaling '{kind}' is not supported")
    if "rope_freqs.weight" in gguf.tensors:
        return _llama3_scaling(gguf, head_dim, theta)
    return None


def _llama3_scaling(gguf: GGUFFile, head_dim: int, theta: float) -> dict[str, Any]:
    """Recover Llama 3's rope_scaling from the per-frequency divisors llama.cpp stores."""
    stored = _f32(gguf, gguf.tensors["rope_freqs.weight"])
    factor = float(stored.max())
    guess: dict[str, Any] = {
        "factor": factor,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    if not np.allclose(_llama3_divisors(head_dim, theta, **guess), stored, rtol=1e-3, atol=1e-4):
        raise UnsupportedArchitecture("GGUF rope_freqs does not follow Llama 3's scaling; it is not supported")
    return {"rope_type": "llama3", **guess}


def _f32(gguf: GGUFFile, info: Any) -> np.ndarray:
    if info.type_name != "F32":
        raise UnsupportedArchitecture(f"GGUF rope_freqs stored as {info.type_name} is not supported")
    return gguf.raw(info, int(np.prod(info.shape)) * 4).view(np.float32)


def _llama3_divisors(
    dims: int,
    theta: float,
    *,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_position_embeddings: int,
) -> np.ndarray:
    """llama.cpp's rope_freqs for Llama 3: 1 for high frequencies, ``factor`` for low, smooth between."""
    old = original_max_position_embeddings
    low_wavelen, high_wavelen = old / low_freq_factor, old / high_freq_factor
    out = []
    for i in range(0, dims, 2):
        wavelen = 2 * math.pi / (theta ** (-i / dims))
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)
