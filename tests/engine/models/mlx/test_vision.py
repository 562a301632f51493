"""A vision-language checkpoint's facts and prompts (``models/mlx/vision.py``), on the tiny vision model:
served only where mlx-vlm serves its family, its images expanded into their image tokens on the CPU
pool, and each image token a virtual id of the picture's content (the prompt cache's key)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.engine import mlx_vlm_adapter
from tinytitan.engine.device.images import VIRTUAL_BASE
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.models.catalog import read_mlx_entry
from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.models.mlx.facts import check_loadable
from tinytitan.engine.models.mlx.vision import Vision
from tinytitan.engine.request import ChatRequest, Image, Message
from tinytitan.engine.service import Engine
from tinytitan.testing.images import checked_picture, image_message
from tinytitan.testing.loop import run

RED, BLUE = checked_picture((200, 10, 10)), checked_picture((10, 10, 200))


@pytest.fixture(scope="module")
def engine(tiny_vision_dir: Path) -> Iterator[Engine]:
    engine = Engine(MlxBackend(str(tiny_vision_dir)))
    yield engine
    engine.shutdown()


def prompt_tokens(engine: Engine, *parts: str | Image) -> list[int]:
    request = ChatRequest(model=engine.info.id, messages=(image_message(*parts),))
    _validated, prompt = run(engine.validate(request))
    return list(prompt.tokens)


def test_a_vision_checkpoint_is_served_and_listed_with_vision(tiny_vision_dir: Path, tiny_dir: Path) -> None:
    check_loadable(tiny_vision_dir)
    entry = read_mlx_entry(tiny_vision_dir, "tiny-vision", origin="models-dir")
    assert entry.info.vision
    assert not read_mlx_entry(tiny_dir, "tiny", origin="models-dir").info.vision
    assert Vision.of(tiny_dir, json.loads((tiny_dir / "config.json").read_text())) is None


def test_without_mlx_vlm_or_for_a_family_not_served_the_directory_is_refused_by_name(
    tiny_vision_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mlx_vlm_adapter, "installed", lambda: False)
    with pytest.raises(ModelUnavailable, match=r"not installed: pip install --no-deps 'mlx-vlm>=0.7.10,<0.8' && pip"):
        check_loadable(tiny_vision_dir)
    monkeypatch.undo()
    other = tmp_path / "qwen3-vl"
    shutil.copytree(tiny_vision_dir, other, ignore=shutil.ignore_patterns("*.safetensors"))
    (other / "model.safetensors").symlink_to(tiny_vision_dir / "model.safetensors")
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "qwen3_vl"}))
    with pytest.raises(ModelUnavailable, match="vision-language family 'qwen3_vl' is not served"):
        check_loadable(other)


def test_a_picture_is_its_image_tokens_each_a_virtual_id_of_its_content(engine: Engine) -> None:
    red = prompt_tokens(engine, "Look: ", RED, " what colour?")
    assert red == prompt_tokens(engine, "Look: ", RED, " what colour?")  # the same picture: the same ids
    blue = prompt_tokens(engine, "Look: ", BLUE, " what colour?")
    assert len(blue) == len(red)
    differ = [i for i, (a, b) in enumerate(zip(red, blue, strict=True)) if a != b]
    assert differ and all(red[i] >= VIRTUAL_BASE and blue[i] >= VIRTUAL_BASE for i in differ)
    assert len(differ) == sum(t >= VIRTUAL_BASE for t in red) == 12
    assert sum(t >= VIRTUAL_BASE for t in prompt_tokens(engine, RED, BLUE, "Two.")) == 24


def test_detail_low_is_the_global_view_alone_under_other_ids(engine: Engine) -> None:
    import dataclasses

    high = [t for t in prompt_tokens(engine, RED, "Colour?") if t >= VIRTUAL_BASE]
    low = [t for t in prompt_tokens(engine, dataclasses.replace(RED, detail="low"), "Colour?") if t >= VIRTUAL_BASE]
    assert len(high) == 12 and len(low) == 4  # no tiles: the 64-pixel global view's 4 tokens
    assert not set(low) & set(high)
    assert [
        t for t in prompt_tokens(engine, dataclasses.replace(RED, detail="high"), "Colour?") if t >= VIRTUAL_BASE
    ] == high


def test_text_that_spells_the_image_token_is_refused_by_name(engine: Engine) -> None:
    with pytest.raises(InvalidRequest, match="contains this model's image token '<image>'"):
        prompt_tokens(engine, "a literal <image> here ", RED)


def test_a_text_only_conversation_renders_as_before(engine: Engine) -> None:
    request = ChatRequest(model=engine.info.id, messages=(Message("user", "Hello"),))
    _validated, prompt = run(engine.validate(request))
    assert prompt.vision is None and all(t < VIRTUAL_BASE for t in prompt.tokens)
    assert prompt.text == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"


def test_a_vision_model_answers_a_text_request_over_a_real_socket(tiny_vision_dir: Path) -> None:
    import httpx

    from tinytitan.testing.server import live_server

    with live_server(MlxBackend(str(tiny_vision_dir))) as live:
        body = {"model": live.engine.info.id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        response = httpx.post(live.v1 + "/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    assert response.json()["usage"] == {
        "prompt_tokens": 9,
        "completion_tokens": 4,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
