"""GGUF files for tests and benchmarks, written the way llama.cpp's converter writes them.

``write_gguf(model, config, arch, path)`` takes an mlx-lm model (Hugging Face parameter names) and
writes a GGUF file with llama.cpp's own name map (the ``gguf`` package's ``TensorNameMap``), its
q/k row permutation for ``llama``, Gemma's norms stored as ``1 + w``, Llama 3's ``rope_freqs``, and
a tokenizer taken from a Hugging Face ``tokenizer.json`` (or a 256-token byte vocabulary). Needs the
``gguf`` package (a test dependency).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CHATML", "TINY_CONFIG", "byte_vocab", "chat_gguf", "hf_vocab", "llama_cpp_permute", "write_gguf"]

_NATIVE_ARCH = {"gemma3_text": "gemma3"}


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute``: q/k rows reordered for interleaved rotary pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def byte_vocab() -> dict[str, Any]:
    """A 256-token byte-level vocabulary (no merges) plus two control tokens."""
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    tokens = [*alphabet, "<|im_start|>", "<|im_end|>"]
    return {"tokens": tokens, "merges": [], "types": [1] * 256 + [3, 3], "pre": "gpt2", "eos": len(tokens) - 1}


def hf_vocab(tokenizer_json: Path, pre: str) -> dict[str, Any]:
    """Tokens, merges and token types from a Hugging Face byte-level BPE ``tokenizer.json``."""
    doc = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab: dict[str, int] = dict(doc["model"]["vocab"])
    kinds = {}
    for added in doc.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
        kinds[added["id"]] = 3 if added.get("special") else 4
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"].get("merges", [])]
    types = [kinds.get(i, 1) for i in range(len(tokens))]
    eos = tokens.index("<|im_end|>") if "<|im_end|>" in tokens else 0
    return {"tokens": tokens, "merges": merges, "types": types, "pre": pre, "eos": eos}


def _llama3_factors(dims: int, theta: float, scaling: dict[str, Any]) -> np.ndarray:
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for i in range(0, dims, 2):
        wavelen = 2 * math.pi / (theta ** (-i / dims))
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_gguf(
    model: Any,
    config: dict[str, Any],
    path: Path,
    *,
    vocab: dict[str, Any] | None = None,
    template: str | None = None,
    quantize: str | None = None,
) -> Path:
    """Write ``model`` (an mlx-lm model built from ``config``) as llama.cpp would convert it.

    ``quantize``: None (F32) or a ggml type name the ``gguf`` package can quantize (Q8_0, Q4_0, …)
    for the 2-D weights.
    """
    import gguf
    import mlx.core as mx
    from mlx.utils import tree_flatten

    arch = _NATIVE_ARCH.get(config["model_type"], config["model_type"])
    vocab = vocab or byte_vocab()
    layers, heads = config["num_hidden_layers"], config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], layers)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"test-{arch}")
    writer.add_context_length(config.get("max_position_embeddings", 512))
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config.get("rope_theta", 10000.0))
    if "head_dim" in config:
        writer.add_key_length(config["head_dim"])
        writer.add_value_length(config["head_dim"])
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(config.get("attn_logit_softcapping", 50.0))
        writer.add_final_logit_softcapping(config.get("final_logit_softcapping", 30.0))
    if arch == "gemma3":
        writer.add_sliding_window(config.get("sliding_window", 512))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab["pre"])
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["types"])
    if vocab["merges"]:
        writer.add_token_merges(vocab["merges"])
    writer.add_eos_token_id(vocab["eos"])
    writer.add_add_bos_token(False)
    if template:
        writer.add_chat_template(template)
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    scaling = config.get("rope_scaling") or {}
    if scaling.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", _llama3_factors(head_dim, config["rope_theta"], scaling))
    params = tree_flatten(model.parameters())
    assert isinstance(params, list)  # (path, array) pairs: no destination dict was given
    for name, value in params:
        array = np.array(value.astype(mx.float32))
        if arch == "llama" and name.endswith("q_proj.weight"):
            array = llama_cpp_permute(array, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            array = llama_cpp_permute(array, kv_heads)
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            array = array + 1
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise KeyError(f"llama.cpp has no name for {name} in {arch}")
        if quantize and array.ndim == 2:
            kind = gguf.GGMLQuantizationType[quantize]
            writer.add_tensor(target, gguf.quants.quantize(array, kind), raw_dtype=kind)
        else:
            writer.add_tensor(target, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# a tiny decoder over the byte vocabulary (258 tokens): the tests' reference models start from it
TINY_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "rms_norm_eps": 1e-6,
    "vocab_size": 258,
    "max_position_embeddings": 512,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_gguf(path: Path, *, seed: int = 7) -> Path:
    """A small servable GGUF file: a 2-layer llama with random weights (``seed``), the byte-level
    vocabulary and a ChatML template (Q8_0 weights). Call it on a device thread (it builds the model
    with MLX); serving it converts it without MLX."""
    import mlx.core as mx
    from mlx.utils import tree_map

    from tinytitan.engine.mlx_lm_adapter import model_classes

    config = {**TINY_CONFIG, "model_type": "llama", "max_position_embeddings": 2048, "tie_word_embeddings": False}
    model_class, args_class = model_classes(config)
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(config))
    model.update(tree_map(lambda p: mx.random.normal(p.shape) * 0.2, model.parameters()))
    mx.eval(model.parameters())
    return write_gguf(model, config, path, template=CHATML, quantize="Q8_0")
