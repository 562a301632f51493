"""The tokenizer rebuilt from a GGUF vocabulary tokenizes as the original does (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from tinytitan.engine.models.gguf.file import GGUFFile
from tinytitan.engine.models.gguf.tokenizer import UnsupportedTokenizer, end_of_turn_ids, write_tokenizer
from tinytitan.testing.gguf_files import hf_vocab

TEXTS = [
    "Hello, world! It's 2024-05-17 and π ≈ 3.14159; 1234567 apples.",
    "def f(x):\n    return x**2  # square\n\n\n\tindented\r\nwindows line",
    "<|im_start|>user\nWhat's up?<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nFine.",
    "  leading spaces, trailing   \n émigré naïve 日本語のテキスト 🙂👍🏽 Ünïcödé",
    "I'LL WE'VE they're 'quoted' “curly” — dashes… and URLs https://example.com/a?b=c&d=1",
]


def _file(metadata: dict[str, Any], arch: str = "qwen3") -> GGUFFile:
    return GGUFFile(Path("test.gguf"), 3, {"general.architecture": arch, **metadata}, {})


def _qwen_metadata(tiny_dir: Path) -> dict[str, Any]:
    vocab = hf_vocab(tiny_dir / "tokenizer.json", "qwen2")
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": vocab["tokens"],
        "tokenizer.ggml.merges": vocab["merges"],
        "tokenizer.ggml.token_type": vocab["types"],
        "tokenizer.ggml.eos_token_id": vocab["eos"],
        "tokenizer.chat_template": "{{ '<|im_start|>' }}{{ '<|im_end|>' }}",
    }


def test_byte_level_bpe_matches_the_original_tokenizer(tiny_dir: Path, tmp_path: Path) -> None:
    write_tokenizer(_file(_qwen_metadata(tiny_dir)), tmp_path, 4096)
    ours = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    original = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    for text in TEXTS:
        ids = original.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, add_special_tokens=False).ids == ids, text
        assert ours.decode(ids, skip_special_tokens=False) == original.decode(ids, skip_special_tokens=False)
    think = original.token_to_id("<think>")
    assert ours.token_to_id("<think>") == think  # user-defined tokens stay whole


def test_tokenizer_config_carries_the_template_and_special_tokens(tiny_dir: Path, tmp_path: Path) -> None:
    gguf = _file(_qwen_metadata(tiny_dir))
    write_tokenizer(gguf, tmp_path, 4096)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|im_end|>" and config["model_max_length"] == 4096
    assert config["chat_template"].startswith("{{ '<|im_start|>' }}")
    tokens = gguf.get("tokenizer.ggml.tokens")
    assert end_of_turn_ids(gguf, gguf.get("tokenizer.chat_template")) == [tokens.index("<|im_end|>")]


def test_digit_splitting_pre_tokenizer_splits_every_digit(tiny_dir: Path, tmp_path: Path) -> None:
    """SmolLM / StarCoder files ('smollm'): digits one by one, then GPT-2's split."""
    write_tokenizer(_file({**_qwen_metadata(tiny_dir), "tokenizer.ggml.pre": "smollm"}), tmp_path, 4096)
    ours = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    pieces = ours.encode("x 2024", add_special_tokens=False).tokens
    assert pieces[-4:] == ["2", "0", "2", "4"]


def test_an_unknown_pre_tokenizer_is_refused_by_name(tiny_dir: Path, tmp_path: Path) -> None:
    metadata = {**_qwen_metadata(tiny_dir), "tokenizer.ggml.pre": "brand-new"}
    with pytest.raises(UnsupportedTokenizer, match="GGUF pre-tokenizer 'brand-new' is not supported"):
        write_tokenizer(_file(metadata), tmp_path, 4096)


def _sentencepiece_metadata(prefix: bool) -> dict[str, Any]:
    pieces = ["▁", "a", "b", "c", "ab", "bc", "▁a", "▁ab", "▁abc"]
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{i:02X}>" for i in range(256)), *pieces]
    types = [2, 3, 3, *([6] * 256), *([1] * len(pieces))]
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_space_prefix": prefix,
        "tokenizer.ggml.add_bos_token": True,
    }


def test_sentencepiece_vocabulary_merges_by_score_and_falls_back_to_bytes(tmp_path: Path) -> None:
    write_tokenizer(_file(_sentencepiece_metadata(prefix=True), arch="llama"), tmp_path, 2048)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    encoded = tok.encode("ab abc é", add_special_tokens=False)
    assert encoded.tokens == ["▁ab", "▁abc", "▁", "<0xC3>", "<0xA9>"]
    assert tok.decode(encoded.ids) == "ab abc é"
    assert tok.encode("ab").tokens[0] == "<s>"  # add_bos_token
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["add_bos_token"]) == ("<s>", "</s>", True)


def test_an_unknown_tokenizer_model_is_refused_by_name(tmp_path: Path) -> None:
    metadata = {**_sentencepiece_metadata(prefix=True), "tokenizer.ggml.model": "rwkv"}
    with pytest.raises(UnsupportedTokenizer, match="GGUF tokenizer model 'rwkv' is not supported"):
        write_tokenizer(_file(metadata), tmp_path, 2048)
