"""The contract ``tinytitan.engine.mlx_vlm_adapter`` holds mlx-vlm to, on the tiny vision model.

Run this before lifting the upper bound on ``mlx-vlm`` in ``pyproject.toml``: the pieces serving
takes from mlx-vlm (its loader, the family's image-token expansion, ``get_input_embeddings`` and the
text model's call) must still give what mlx-vlm's own whole-model call gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine import mlx_vlm_adapter as vlm
from tinytitan.engine.device.images import VIRTUAL_BASE, ImageModel, VisionPrompt
from tinytitan.engine.models.mlx.vision import _decoded
from tinytitan.testing.images import checked_picture
from tinytitan.testing.tiny_vision import IMAGE_TOKEN_ID


@pytest.fixture(scope="module")
def model(tiny_vision_dir: Path) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True):
        import mlx.core as mx

        loaded = vlm.load_model(tiny_vision_dir)
        mx.eval(loaded.parameters())  # type: ignore[attr-defined]
    return loaded


@pytest.fixture(scope="module")
def config(tiny_vision_dir: Path) -> dict[str, Any]:
    return dict(json.loads((tiny_vision_dir / "config.json").read_text()))


def test_the_family_is_found_on_disk_and_the_model_has_what_serving_reads(model: Any) -> None:
    assert vlm.installed() and vlm.supported("idefics3") and not vlm.supported("no_such_family")
    assert vlm.problems(model) == []
    assert isinstance(model.language_model.layers, list) and len(model.language_model.layers) == 2
    assert vlm.problems(object()) == [
        "Model.get_input_embeddings()",
        "Model.language_model()",
        "Model.config.image_token_index",
    ]


def test_an_image_becomes_its_tiles_image_tokens_and_numpy_pixels(
    tiny_vision_dir: Path, config: dict[str, Any]
) -> None:
    import numpy as np

    assert vlm.image_token(tiny_vision_dir, config) == ("<image>", IMAGE_TOKEN_ID)
    processor = vlm.image_processor(tiny_vision_dir)
    wide, text = vlm.image_tokens(tiny_vision_dir, config, processor, _decoded(checked_picture((1, 2, 3), (100, 50))))
    assert wide.count("<image>") == (1 * 2 + 1) * 4  # one row of two tiles, the global view; 4 tokens each
    assert "<row_1_col_2>" in wide and "<global-img>" in wide
    assert all(isinstance(v, np.ndarray) for v in text.values())  # no MLX array off the device thread
    assert text["pixel_values"].shape == (1, 3, 3, 64, 64)
    small, pixels = vlm.image_tokens(tiny_vision_dir, config, processor, _decoded(checked_picture((1, 2, 3), (30, 30))))
    assert small.count("<image>") == (2 * 2 + 1) * 4  # resized to the longest edge (128): 2 × 2 tiles
    assert pixels["pixel_values"].shape == (1, 5, 3, 64, 64)


def test_features_spliced_by_virtual_id_give_mlx_vlms_own_logits(
    tiny_vision_dir: Path, config: dict[str, Any], model: Any, device: None
) -> None:
    """The row's prefill through ``ImageModel`` (virtual ids, features held) equals mlx-vlm's whole-model
    call on the same prompt with the image tokens and pixel values."""
    import mlx.core as mx
    import numpy as np

    from tinytitan.engine.device.images import ImageSpan

    processor = vlm.image_processor(tiny_vision_dir)
    image_text, pixels = vlm.image_tokens(tiny_vision_dir, config, processor, _decoded(checked_picture((200, 10, 10))))
    n = image_text.count("<image>")
    prompt = [151644, 872, 198, IMAGE_TOKEN_ID, *([IMAGE_TOKEN_ID] * (n - 1)), 3555, 151645, 198]
    positions = [i for i, t in enumerate(prompt) if t == IMAGE_TOKEN_ID]
    first = VIRTUAL_BASE + 12345
    virtual = [first + positions.index(i) if t == IMAGE_TOKEN_ID else t for i, t in enumerate(prompt)]
    arrays = {k: mx.array(v) for k, v in pixels.items()}
    reference = model(mx.array([prompt]), **arrays).logits
    served = ImageModel(model)
    served.admit(7, VisionPrompt((ImageSpan(first, n, positions[-1] + 1, pixels),), IMAGE_TOKEN_ID), reused=0)
    assert served.holding == 1
    ours = served(mx.array([virtual]))
    assert np.allclose(np.array(ours), np.array(reference), atol=1e-4)
    text_only = model.language_model(mx.array([prompt])).logits  # the placeholder's own embedding instead
    assert not np.allclose(np.array(ours), np.array(text_only), atol=1e-3)
    served.release(7)
    assert served.holding == 0
    plain = [151644, 872, 198, 3555]
    assert np.allclose(np.array(served(mx.array([plain]))), np.array(model.language_model(mx.array([plain])).logits))


def test_a_picture_the_prompt_cache_covered_or_seen_lately_is_not_computed_again(
    tiny_vision_dir: Path, config: dict[str, Any], model: Any, device: None
) -> None:
    from tinytitan.engine.device.images import ImageSpan

    processor = vlm.image_processor(tiny_vision_dir)
    _text, pixels = vlm.image_tokens(tiny_vision_dir, config, processor, _decoded(checked_picture((0, 0, 200))))
    served = ImageModel(model, recent=1)
    span = ImageSpan(VIRTUAL_BASE, 12, 20, pixels)
    served.admit(1, VisionPrompt((span,), IMAGE_TOKEN_ID), reused=20)
    assert served.holding == 0 and served.computed == 0
    served.admit(1, VisionPrompt((span,), IMAGE_TOKEN_ID), reused=19)
    assert served.holding == 1 and served.computed == 1
    served.release(1)
    served.admit(2, VisionPrompt((span,), IMAGE_TOKEN_ID), reused=0)  # the same picture behind another prefix
    assert served.holding == 1 and served.computed == 1
    other = ImageSpan(VIRTUAL_BASE + 99, 12, 20, pixels)
    served.admit(3, VisionPrompt((other,), IMAGE_TOKEN_ID), reused=0)
    served.admit(4, VisionPrompt((span,), IMAGE_TOKEN_ID), reused=0)  # pushed out by the other (recent=1)
    assert served.computed == 3
