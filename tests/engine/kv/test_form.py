"""``KvForm``: the flags' checks, what a token of context costs in each form, and which models it fits."""

from __future__ import annotations

import logging

import pytest

from tinytitan.engine.kv.form import KvForm, head_dims, served_form, token_bytes
from tinytitan.testing.tiny_model import SHAPES

QWEN3_06B = {**SHAPES["0.6b"]}


def test_the_flags_are_checked() -> None:
    assert KvForm(4).problem() is None and KvForm(8, 128, 5000).problem() is None
    assert KvForm(3).problem() == "--kv-bits takes 4 or 8, not 3"
    assert KvForm(4, 16).problem() == "--kv-group-size takes 32, 64, 128, not 16"
    assert KvForm(4, 64, -1).problem() == "--quantized-kv-start must be 0 or more"


def test_a_token_costs_under_a_third_at_4_bits_and_about_half_at_8() -> None:
    full = token_bytes(QWEN3_06B, "bfloat16", None)
    assert full == 28 * 8 * 2 * 128 * 2  # layers × kv heads × (keys + values) × head × 2 bytes
    four, eight = token_bytes(QWEN3_06B, "bfloat16", KvForm(4)), token_bytes(QWEN3_06B, "bfloat16", KvForm(8))
    assert four is not None and eight is not None
    assert four / full <= 0.3 and 0.5 < eight / full < 0.6
    assert token_bytes(QWEN3_06B, "float32", None) == 2 * full  # the CPU computes in float32
    assert token_bytes({"model_type": "unknown"}, "float32", None) is None


def test_head_sizes_are_read_from_the_config() -> None:
    assert head_dims(QWEN3_06B) == (28, 8, 128, 128)
    assert head_dims({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}) == (2, 4, 64, 64)
    mla = {"num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 16, "hidden_size": 2048}
    mla |= {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}
    assert head_dims(mla) == (3, 16, 192, 128)
    nested = {"text_config": QWEN3_06B, "model_type": "vlm"}
    assert head_dims(nested) == (28, 8, 128, 128)


def test_a_model_whose_heads_do_not_split_into_groups_keeps_full_precision(caplog: pytest.LogCaptureFixture) -> None:
    tiny = {**SHAPES["tiny"]}  # heads of 16
    with caplog.at_level(logging.WARNING, logger="tinytitan.mlx"):
        assert served_form(KvForm(4, 64), tiny, "tiny") is None
    assert "tiny: heads of 16 do not split into groups of 64 (--kv-group-size)" in caplog.text
    assert served_form(KvForm(4, 64), {**SHAPES["tiny-kv"]}, "tiny-kv") == KvForm(4, 64)
    assert served_form(None, tiny, "tiny") is None


def test_the_form_names_itself() -> None:
    assert KvForm(4).describe() == "4-bit KV cache (group 64)"
    assert KvForm(8, 32, 5000).describe() == "8-bit KV cache (group 32, from token 5000)"
    assert KvForm(8, 32, 5000).as_json() == {"kv_bits": 8, "kv_group_size": 32, "quantized_kv_start": 5000}
    assert KvForm(4).tag != KvForm(8).tag != KvForm(8, 32).tag
