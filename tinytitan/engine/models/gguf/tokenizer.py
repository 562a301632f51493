"""A Hugging Face ``tokenizer.json`` and ``tokenizer_config.json`` from a GGUF file's vocabulary.

Two tokenizer models appear in GGUF files:
- ``gpt2`` — byte-level BPE (Llama 3, Qwen, SmolLM, …): the vocabulary and merges as stored, split
  first by the pre-tokenizer regex ``tokenizer.ggml.pre`` names (the same table llama.cpp keeps), then
  mapped to the byte alphabet. An unknown pre-tokenizer is refused, as llama.cpp refuses it: a wrong
  split tokenizes text differently from what the model was trained on.
- ``llama`` — SentencePiece BPE (Gemma, Llama 2, Mistral): ``▁`` for spaces, byte fallback
  (``<0x0A>``), merges rebuilt from the vocabulary ranked by score (by position for Gemma, whose
  scores do not follow its merge order).
Tokens the file marks control (3) become special added tokens, user-defined ones (4) plain added
tokens (matched whole, e.g. ``<think>``). No mlx import here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tinytitan.engine.models.gguf.file import GGUFFile

__all__ = ["PRE_TOKENIZERS", "UnsupportedTokenizer", "end_of_turn_ids", "write_tokenizer"]

_CONTROL, _USER_DEFINED = 3, 4
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
# tokenizer.ggml.pre -> how text is split before BPE (llama.cpp's llama-vocab.cpp table)
PRE_TOKENIZERS: dict[str, str] = {
    **dict.fromkeys(("default", "gpt2", "gpt-2", "phi-2"), "gpt2"),
    **dict.fromkeys(("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone"), "digits"),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), "qwen2"),
    **dict.fromkeys(("llama-bpe", "llama3", "llama-v3", "smaug-bpe", "dbrx", "falcon3"), "llama3"),
}
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>")


class UnsupportedTokenizer(ValueError):
    """A tokenizer this build cannot rebuild from the file; the message names it."""


def _byte_level(gguf: GGUFFile, tokens: list[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    pre = str(gguf.get("tokenizer.ggml.pre", "default"))
    if pre not in PRE_TOKENIZERS:
        known = ", ".join(sorted(PRE_TOKENIZERS))
        raise UnsupportedTokenizer(f"GGUF pre-tokenizer '{pre}' is not supported; supported: {known}")
    style = PRE_TOKENIZERS[pre]
    merges = [tuple(m.split(" ", 1)) for m in gguf.get("tokenizer.ggml.merges") or []]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=style == "llama3"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=style in ("gpt2", "digits"))
    if style == "digits":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif style in ("qwen2", "llama3"):
        split = pre_tokenizers.Split(Regex(_QWEN2 if style == "qwen2" else _LLAMA3), behavior="isolated")
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    else:
        tok.pre_tokenizer = byte_level
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    return tok


def _sentencepiece(gguf: GGUFFile, tokens: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    types = list(gguf.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    gemma = gguf.architecture.startswith("gemma")
    if gemma:  # runs of spaces are stored as spaces; the model's alphabet writes them as ▁
        tokens = ["▁" * len(t) if t and not t.strip(" ") else t for t in tokens]
    vocab = {t: i for i, t in enumerate(tokens)}
    scores = gguf.get("tokenizer.ggml.scores")
    rank: dict[str, float]
    if gemma or scores is None:
        rank = {t: -i for i, t in enumerate(tokens)}
    else:
        rank = {t: float(s) for t, s in zip(tokens, scores, strict=False)}
    merges = []
    for token, kind in zip(tokens, types, strict=False):
        if kind != 1 or len(token) < 2:
            continue
        local = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in vocab and token[i:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges += [(left, right, rank[token]) for left, right in local]
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    unk_id = gguf.get("tokenizer.ggml.unknown_token_id")
    unk = tokens[unk_id] if isinstance(unk_id, int) and unk_id < len(tokens) else None
    model = models.BPE(vocab, [(a, b) for a, b, _ in merges], unk_token=unk, fuse_unk=True, byte_fallback=True)
    tok = Tokenizer(model)
    prefix = bool(gguf.get("tokenizer.ggml.add_space_prefix", not gemma))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first" if prefix else "never")
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence([*steps, decoders.Strip(" ", 1, 0)] if prefix else steps)
    return tok


def _token(gguf: GGUFFile, tokens: list[str], key: str) -> str | None:
    index = gguf.get(f"tokenizer.ggml.{key}_token_id")
    return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else None


def end_of_turn_ids(gguf: GGUFFile, template: str) -> list[int]:
    """EOS, EOT and EOM ids, plus the end-of-turn markers the chat template writes."""
    tokens = list(gguf.get("tokenizer.ggml.tokens") or [])
    ids = [gguf.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")]
    ids += [tokens.index(m) for m in _END_OF_TURN if m in template and m in tokens]
    return list(dict.fromkeys(i for i in ids if isinstance(i, int) and 0 <= i < len(tokens)))


def write_tokenizer(gguf: GGUFFile, out: Path, context: int) -> None:
    """tokenizer.json and tokenizer_config.json (with the chat template, when the file has one)."""
    from tokenizers import AddedToken, processors

    tokens = list(gguf.get("tokenizer.ggml.tokens") or [])
    kind = gguf.get("tokenizer.ggml.model")
    if not tokens:
        raise UnsupportedTokenizer("the GGUF file has no tokenizer (tokenizer.ggml.tokens)")
    if kind == "gpt2":
        tok = _byte_level(gguf, tokens)
    elif kind == "llama":
        tok = _sentencepiece(gguf, tokens)
    else:
        raise UnsupportedTokenizer(f"GGUF tokenizer model '{kind}' is not supported; supported: gpt2, llama")
    types = list(gguf.get("tokenizer.ggml.token_type", []))
    marked = list(zip(tokens, types, strict=False))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in marked if k == _CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, k in marked if k == _USER_DEFINED])
    bos = _token(gguf, tokens, "bos")
    add_bos = bool(gguf.get("tokenizer.ggml.add_bos_token", kind == "llama"))
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tokens.index(bos))]
        )
    tok.save(str(out / "tokenizer.json"))
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": _token(gguf, tokens, "eos"),
        "unk_token": _token(gguf, tokens, "unknown"),
        "pad_token": _token(gguf, tokens, "padding"),
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": context,
    }
    template = gguf.get("tokenizer.chat_template")
    if isinstance(template, str) and template.strip():
        config["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
