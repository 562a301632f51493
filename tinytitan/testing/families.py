"""Tiny model directories for the model families people run (issue #18), built without a download.

Each family gets: a tiny random-weight model of its own architecture (one mlx-lm loads), a tokenizer
carrying the family's special tokens at working ids, and the family's REAL chat template
(``templates/``, sources in ``templates/SOURCES.md``). The tokenizers are Qwen's byte-level BPE
vocabulary with the family's added tokens after it (ids differ from the real models'; the text does
not), except gpt-oss, whose tokenizer is the real ``o200k_harmony`` layout (OpenAI's ``o200k_base``
ranks, ``tinytitan.testing.o200k``, with the harmony tokens at their real ids) because
``openai-harmony`` parses its output.

    python -m tinytitan.testing.families NAME OUT_DIR     # or: --list

``family_dir(name)`` returns a per-machine cached build; ``family_dir(name, text_markers=True)`` the
same family over a tokenizer that has only its end, begin and padding tokens, so its call and
thinking markers are plain text (as on a generic tokenizer serving that family's template).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from tinytitan.testing.tiny_model import (
    QWEN3_SPECIAL_TOKENS,
    SEED,
    _key,
    added_tokens_decoder,
    cache_root,
    cached_dir,
)

__all__ = ["FAMILIES", "Family", "build_family", "family_dir", "main"]

TEMPLATES = Path(__file__).with_name("templates")
O200K_RANKS = 199998
_SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}


@dataclass(frozen=True)
class Family:
    name: str
    title: str  # the models it stands for
    template: str  # file under templates/
    arch: dict[str, Any]  # model_type and the fields its ModelArgs need (the shape is shared)
    specials: tuple[str, ...]  # added tokens, in id order after the ranks
    eos: tuple[str, ...]
    bos: str | None = None
    pad: str | None = None
    plain: frozenset[str] = frozenset()  # added tokens that are not "special" (decoded like text)
    vocab: str = "qwen"  # qwen | o200k
    config: dict[str, Any] = field(default_factory=dict)  # extra tokenizer_config.json entries


_QWEN3 = tuple(c for _, c, _ in QWEN3_SPECIAL_TOKENS)
_QWEN3_PLAIN = frozenset(c for _, c, s in QWEN3_SPECIAL_TOKENS if not s)
_GLM = (
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>",
    "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "/nothink",
)  # fmt: skip
_MISTRAL = (
    "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]", "[ARGS]", "[CALL_ID]",
)  # fmt: skip
_GEMMA4 = (
    "<pad>", "<eos>", "<bos>", "<mask>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
    "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>',
    "<|image|>", "<|audio|>", "<|video|>",
)  # fmt: skip
_LLAMA3 = (
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
)  # fmt: skip
_KIMI = (
    "[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>", "<|end_header_id|>",
    "[EOT]", "<|im_system|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|im_middle|>", "<|media_start|>", "<|media_content|>",
    "<|media_end|>", "<|media_pad|>", "[UNK]", "[PAD]",
)  # fmt: skip
# o200k_harmony: the harmony tokens at their real ids (199998...), the rest reserved up to 201087
_HARMONY_NAMED = {
    199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
    200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
    200018: "<|endofprompt|>",
}  # fmt: skip
_HARMONY = tuple(_HARMONY_NAMED.get(i, f"<|reserved_{i}|>") for i in range(O200K_RANKS, 201088))

_QWEN3_ARCH = {"model_type": "qwen3", "intermediate_size": 64, "head_dim": 16, "rope_theta": 1e6}
_QWEN3_MOE = {
    "model_type": "qwen3_moe", "intermediate_size": 64, "moe_intermediate_size": 16, "num_experts": 4,
    "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
    "head_dim": 16, "rope_theta": 1e6,
}  # fmt: skip
_GLM4_MOE = {
    "model_type": "glm4_moe", "intermediate_size": 64, "moe_intermediate_size": 16, "norm_topk_prob": True,
    "n_group": 1, "head_dim": 16, "topk_group": 1, "n_shared_experts": 1, "n_routed_experts": 4,
    "routed_scaling_factor": 1.0, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "rope_theta": 1e6,
    "rope_scaling": None, "use_qk_norm": False, "attention_bias": True, "partial_rotary_factor": 0.5,
}  # fmt: skip
_MISTRAL_ARCH = {"model_type": "mistral", "intermediate_size": 64, "head_dim": 16, "rope_theta": 1e9}
_LLAMA_ARCH = {"model_type": "llama", "intermediate_size": 64, "head_dim": 16, "rope_theta": 5e5}
_GEMMA4_ARCH = {
    "model_type": "gemma4_text", "intermediate_size": 64, "head_dim": 16, "global_head_dim": 32,
    "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 8, "sliding_window": 128,
    "sliding_window_pattern": 2, "layer_types": ["sliding_attention", "full_attention"],
}  # fmt: skip
_GPT_OSS_ARCH = {
    "model_type": "gpt_oss", "intermediate_size": 32, "head_dim": 16, "num_local_experts": 4,
    "num_experts_per_tok": 2, "sliding_window": 128, "rope_theta": 150000,
    "layer_types": ["sliding_attention", "full_attention"],
}  # fmt: skip
_KIMI_ARCH = {
    "model_type": "kimi_k2", "intermediate_size": 64, "moe_intermediate_size": 16, "n_shared_experts": 1,
    "n_routed_experts": 4, "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "qk_nope_head_dim": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "rope_theta": 50000.0,
    "num_key_value_heads": 2,
}  # fmt: skip

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "qwen3",
            "Qwen3",
            "qwen3.jinja",
            _QWEN3_ARCH,
            _QWEN3,
            ("<|im_end|>", "<|endoftext|>"),
            pad="<|endoftext|>",
            plain=_QWEN3_PLAIN,
        ),
        Family(
            "qwen3-coder",
            "Qwen3-Coder",
            "qwen3-coder.jinja",
            _QWEN3_MOE,
            _QWEN3,
            ("<|im_end|>", "<|endoftext|>"),
            pad="<|endoftext|>",
            plain=_QWEN3_PLAIN,
        ),
        Family(
            "glm-4.6",
            "GLM-4.5 / 4.6",
            "glm-4.6.jinja",
            _GLM4_MOE,
            _GLM,
            ("<|endoftext|>", "<|user|>", "<|observation|>"),
            pad="<|endoftext|>",
        ),
        Family(
            "glm-4.7",
            "GLM-4.7",
            "glm-4.7.jinja",
            _GLM4_MOE,
            _GLM,
            ("<|endoftext|>", "<|user|>", "<|observation|>"),
            pad="<|endoftext|>",
        ),
        Family(
            "mistral",
            "Mistral Small 3.2",
            "mistral-small-3.2.jinja",
            _MISTRAL_ARCH,
            _MISTRAL,
            ("</s>",),
            bos="<s>",
            pad="<pad>",
        ),
        Family(
            "devstral", "Devstral Small", "devstral.jinja", _MISTRAL_ARCH, _MISTRAL, ("</s>",), bos="<s>", pad="<pad>"
        ),
        Family(
            "gemma-4",
            "Gemma 4",
            "gemma-4.jinja",
            _GEMMA4_ARCH,
            _GEMMA4,
            ("<eos>", "<turn|>", "<|tool_response>"),
            bos="<bos>",
            pad="<pad>",
        ),
        Family(
            "llama-3",
            "Llama 3.1 / 3.2 / 3.3",
            "llama-3.3.jinja",
            _LLAMA_ARCH,
            _LLAMA3,
            ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
            bos="<|begin_of_text|>",
            pad="<|finetune_right_pad_id|>",
        ),
        Family(
            "gpt-oss",
            "gpt-oss",
            "gpt-oss.jinja",
            _GPT_OSS_ARCH,
            _HARMONY,
            ("<|return|>", "<|call|>", "<|endoftext|>"),
            bos="<|startoftext|>",
            pad="<|endoftext|>",
            vocab="o200k",
        ),
        Family(
            "kimi-k2",
            "Kimi K2 Instruct",
            "kimi-k2.jinja",
            _KIMI_ARCH,
            _KIMI,
            ("<|im_end|>", "[EOS]"),
            bos="[BOS]",
            pad="[PAD]",
        ),
        Family(
            "kimi-k2-thinking",
            "Kimi K2 Thinking",
            "kimi-k2-thinking.jinja",
            _KIMI_ARCH,
            (*_KIMI, "<think>", "</think>"),
            ("<|im_end|>", "[EOS]"),
            bos="[BOS]",
            pad="[PAD]",
        ),
    )
}


def _tokenizer_json(family: Family) -> Path:
    key = _key("family-tokenizer", family.vocab, family.specials, sorted(family.plain))
    path = cache_root() / "tokenizers" / f"{family.vocab}-{key}" / "tokenizer.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        _build_tokenizer(family, tmp)
        os.replace(tmp, path)
    return path


def _build_tokenizer(family: Family, out: Path) -> None:
    """The family's vocabulary with its added tokens after the ranks.

    A token the ranks already spell (``<s>`` and ``</s>`` are plain BPE tokens in Qwen's vocabulary)
    keeps that id and becomes special there.
    """
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import TikTokenConverter

    if family.vocab == "o200k":
        from tinytitan.testing.o200k import O200K_PATTERN, o200k_tiktoken

        tok = TikTokenConverter(vocab_file=str(o200k_tiktoken()), pattern=O200K_PATTERN).converted()
    else:
        from tinytitan.testing.tiny_model import QWEN_PATTERN, _tiktoken_file

        tok = TikTokenConverter(vocab_file=str(_tiktoken_file()), pattern=QWEN_PATTERN).converted()
    for content in family.specials:
        token = AddedToken(content, special=content not in family.plain, normalized=False)
        if content in family.plain:
            tok.add_tokens([token])
        else:
            tok.add_special_tokens([token])
        if tok.token_to_id(content) is None:
            raise RuntimeError(f"could not add {content}")
    tok.save(str(out))


def _family(name: str, text_markers: bool = False) -> Family:
    """The family, or its variant whose added tokens are only the end, begin and padding ones."""
    family = FAMILIES[name]
    if not text_markers:
        return family
    kept = tuple(dict.fromkeys(t for t in (*family.eos, family.bos, family.pad) if t))
    return replace(family, name=f"{name}@text-markers", specials=kept, plain=frozenset())


def _ids(family: Family) -> dict[str, int]:
    """The id of each added token in the built tokenizer."""
    return _ids_of(family.name)


@cache
def _ids_of(name: str) -> dict[str, int]:
    from tokenizers import Tokenizer

    base, _, variant = name.partition("@")
    family = _family(base, text_markers=bool(variant))
    tok = Tokenizer.from_file(str(_tokenizer_json(family)))
    ids: dict[str, int] = {}
    for content in family.specials:
        token_id = tok.token_to_id(content)
        if token_id is None:  # the build adds every special token, or fails
            raise RuntimeError(f"{content!r} is missing from the built {name} tokenizer")
        ids[content] = token_id
    return ids


def _tokenizer_config(family: Family) -> dict[str, Any]:
    decoder = added_tokens_decoder((i, c, c not in family.plain) for c, i in _ids(family).items())
    return {
        "add_bos_token": False,
        "added_tokens_decoder": decoder,
        "bos_token": family.bos,
        "clean_up_tokenization_spaces": False,
        "eos_token": family.eos[0],
        "pad_token": family.pad,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
        **family.config,
    }


def _model_config(family: Family) -> dict[str, Any]:
    ids = _ids(family)
    vocab = -(-(max(ids.values()) + 1) // 64) * 64
    return {
        **_SHAPE,
        **family.arch,
        "vocab_size": vocab,
        "vocab_size_per_layer_input": vocab,  # gemma4_text
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": family.arch["model_type"] != "gpt_oss",
        "bos_token_id": ids.get(family.bos or ""),
        "eos_token_id": [ids[e] for e in family.eos],
        "torch_dtype": "float32",
    }


def build_family(name: str, out: str | Path, *, text_markers: bool = False) -> Path:
    """Write the family's model directory (random weights, fixed seed) to ``out``; returns it."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import save_config

    from tinytitan.engine.mlx_lm_adapter import model_classes

    family = _family(name, text_markers)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = _model_config(family)
    model_class, args_class = model_classes(config)
    mx.random.seed(SEED)
    model = model_class(args_class.from_dict(config))
    mx.eval(model.parameters())
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    save_config(dict(config), out / "config.json")
    generation = {"eos_token_id": config["eos_token_id"], "do_sample": True, "temperature": 0.7, "top_p": 0.95}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    shutil.copyfile(_tokenizer_json(family), out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(family), indent=2), encoding="utf-8")
    shutil.copyfile(TEMPLATES / family.template, out / "chat_template.jinja")
    return out


def family_dir(name: str, *, text_markers: bool = False) -> Path:
    """A cached build of the family's model directory (built on first use)."""
    family = _family(name, text_markers)
    template = (TEMPLATES / family.template).read_text(encoding="utf-8")
    key = _key(family.name, template, _model_config(family), _tokenizer_config(family))
    where = cache_root() / "families" / f"{family.name.replace('@', '-')}-{key}"
    return cached_dir(where, lambda out: build_family(name, out, text_markers=text_markers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tinytitan.testing.families", description="Build a tiny model directory of a model family."
    )
    parser.add_argument("name", nargs="?", choices=sorted(FAMILIES))
    parser.add_argument("out_dir", nargs="?", type=Path)
    parser.add_argument("--list", action="store_true", help="list the families")
    args = parser.parse_args(argv)
    if args.list or args.name is None:
        for family in FAMILIES.values():
            print(f"{family.name:18} {family.title}")
        return 0
    if args.out_dir is None:
        print(family_dir(args.name))
        return 0
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        print(f"error: {args.out_dir} exists and is not empty", file=sys.stderr)
        return 2
    build_family(args.name, args.out_dir)
    print(args.out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
