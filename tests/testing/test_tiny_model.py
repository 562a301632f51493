"""The tiny real model factory (design.md "The tiny real model")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinytitan.testing import tiny_model
from tinytitan.testing.tiny_model import QWEN3_SPECIAL_TOKENS, QWEN_PATTERN, tiny_model_dir

SAMPLE = (
    "Hello, world! The year 2024 had 366 days; 3.14159 ≈ π. 你好，世界。Привет! "
    "def f(x):\n    return x ** 2  # comment\n\n\n  indented\ttabs   and  spaces 's 'll "
    'emoji 🚀🎉 naïve café <div class="a">x</div> 1234567890 https://example.com/a?b=c'
)


def test_cached_build_is_reused(tiny_dir: Path) -> None:
    assert tiny_model_dir() == tiny_dir
    names = {p.name for p in tiny_dir.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
    } <= names
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["vocab_size"] == 151936 and config["hidden_size"] == 64
    tok_config = json.loads((tiny_dir / "tokenizer_config.json").read_text())
    assert tok_config["tool_parser_type"] == "json_tools"


def test_tokenizer_matches_tiktoken_and_qwen3_ids(tiny_dir: Path) -> None:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer

    ranks = load_tiktoken_bpe(str(tiny_model._tiktoken_file()))
    reference = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens={})
    ours = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    assert ours.encode(SAMPLE, add_special_tokens=False).ids == reference.encode(SAMPLE)
    assert ours.encode("12345", add_special_tokens=False).ids == [16, 17, 18, 19, 20]  # single digits
    for token_id, content, _special in QWEN3_SPECIAL_TOKENS:
        assert ours.token_to_id(content) == token_id
    assert ours.token_to_id("<think>") == 151667 and ours.token_to_id("</tool_call>") == 151658


@pytest.mark.usefixtures("device")  # the test loads it itself, as the device worker would
def test_mlx_lm_loads_it(tiny_dir: Path) -> None:
    from mlx_lm import load

    _model, tokenizer = load(str(tiny_dir))
    assert tokenizer.has_tool_calling and tokenizer.tool_call_start == "<tool_call>"
    assert tokenizer.think_start == "<think>"
    assert {151643, 151645} <= set(tokenizer.eos_token_ids)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_cli_builds_a_quantized_directory(tmp_path: Path) -> None:
    out = tmp_path / "q"
    assert tiny_model.main([str(out), "--quantize", "4"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"]["bits"] == 4
    assert tiny_model.main([str(out)]) == 2  # not empty: refused


def test_unknown_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown shape"):
        tiny_model.model_config("huge", "float32")
