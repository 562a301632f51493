"""The tiny vision model factory (``python -m tinytitan.testing.tiny_model DIR --vision``)."""

from __future__ import annotations

import json
from pathlib import Path

from tinytitan.engine.models.mlx.facts import check_loadable, read_facts
from tinytitan.testing import tiny_model
from tinytitan.testing.tiny_vision import IMAGE_TOKEN_ID, VISION_SPECIAL_TOKENS


def test_the_command_builds_a_vision_model_with_its_processor(tmp_path: Path) -> None:
    out = tmp_path / "vision"
    assert tiny_model.main([str(out), "--vision"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "preprocessor_config.json", "processor_config.json"} <= names
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "idefics3" and config["image_token_id"] == IMAGE_TOKEN_ID
    assert config["text_config"]["hidden_size"] == 64 and "vision_config" in config
    check_loadable(out)
    assert read_facts(out, "tiny-vision").info.vision


def test_the_image_tokens_sit_after_qwen3s_and_are_single_tokens(tiny_vision_dir: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny_vision_dir / "tokenizer.json"))
    for token_id, content, _special in VISION_SPECIAL_TOKENS:
        assert tokenizer.token_to_id(content) == token_id
    assert tokenizer.encode("<fake_token_around_image><global-img><image>", add_special_tokens=False).ids == [
        IMAGE_TOKEN_ID - 1,
        IMAGE_TOKEN_ID + 2,
        IMAGE_TOKEN_ID,
    ]


def test_the_command_builds_a_qwen25_vl_with_its_processor(tmp_path: Path) -> None:
    from tinytitan.testing.tiny_qwen_vl import IMAGE_PAD_ID

    out = tmp_path / "qwen-vl"
    assert tiny_model.main([str(out), "--vision", "--family", "qwen2.5-vl"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_vl" and config["image_token_id"] == IMAGE_PAD_ID
    assert config["rope_scaling"]["type"] == "mrope" and sum(config["rope_scaling"]["mrope_section"]) == 8
    assert "<|vision_start|><|image_pad|><|vision_end|>" in (out / "chat_template.jinja").read_text()
    assert json.loads((out / "preprocessor_config.json").read_text())["image_processor_type"] == "Qwen2VLImageProcessor"
    check_loadable(out)
    assert read_facts(out, "tiny-qwen-vl").info.vision
