"""The contract ``mlx_vlm_adapter`` holds mlx-vlm to on an M-RoPE family: the tiny Qwen2.5-VL.

Serving gives its text model 3-D position ids it makes itself (``images.mrope_table``,
``device/rope.py``): they must be mlx-vlm's own (``get_rope_index``), and a row's prefill through
``ImageModel`` on a batch cache must give mlx-vlm's whole-model logits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine import mlx_vlm_adapter as vlm
from tinytitan.engine.device.images import VIRTUAL_BASE, ImageModel, ImageSpan, VisionPrompt, mrope_table
from tinytitan.engine.models.mlx.vision import _decoded
from tinytitan.testing.images import checked_picture
from tinytitan.testing.tiny_qwen_vl import IMAGE_PAD_ID

START, END = 151652, 151653  # <|vision_start|>, <|vision_end|>


@pytest.fixture(scope="module")
def model(tiny_qwen_vl_dir: Path) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True):
        import mlx.core as mx

        loaded = vlm.load_model(tiny_qwen_vl_dir)
        mx.eval(loaded.parameters())  # type: ignore[attr-defined]
    return loaded


@pytest.fixture(scope="module")
def config(tiny_qwen_vl_dir: Path) -> dict[str, Any]:
    return dict(json.loads((tiny_qwen_vl_dir / "config.json").read_text()))


def picture(path: Path, config: dict[str, Any], rgb: tuple[int, int, int], size: tuple[int, int]) -> tuple[int, Any]:
    processor = vlm.image_processor(path)
    text, pixels = vlm.image_tokens(path, config, processor, _decoded(checked_picture(rgb, size)))
    return text.count("<|image_pad|>"), pixels


def test_the_family_is_served_with_its_image_pad_and_merged_grid(
    tiny_qwen_vl_dir: Path, config: dict[str, Any], model: Any
) -> None:
    import numpy as np

    assert vlm.supported("qwen2_5_vl") and vlm.problems(model) == [] and vlm.mrope(model)
    assert vlm.image_token(tiny_qwen_vl_dir, config) == ("<|image_pad|>", IMAGE_PAD_ID)
    n, pixels = picture(tiny_qwen_vl_dir, config, (1, 2, 3), (100, 50))
    assert all(isinstance(v, np.ndarray) for v in pixels.values())  # no MLX array off the device thread
    t, h, w = vlm.grid(config, pixels)
    assert n == t * h * w and (h, w) != (w, h) and n >= 4


def test_our_positions_are_mlx_vlms_own(
    tiny_qwen_vl_dir: Path, config: dict[str, Any], model: Any, device: None
) -> None:
    import mlx.core as mx
    import numpy as np

    (n1, p1), (n2, p2) = (
        picture(tiny_qwen_vl_dir, config, c, s) for c, s in (((9, 9, 9), (100, 50)), ((5, 5, 5), (40, 90)))
    )
    prompt = [
        151644,
        872,
        START,
        *[IMAGE_PAD_ID] * n1,
        END,
        3555,
        11,
        START,
        *[IMAGE_PAD_ID] * n2,
        END,
        30,
        151645,
        198,
    ]
    grids = mx.array(np.concatenate([p1["image_grid_thw"], p2["image_grid_thw"]]))
    reference, delta = model.language_model.get_rope_index(mx.array([prompt]), grids)
    spans = (
        ImageSpan(0, n1, 3 + n1, p1, vlm.grid(config, p1)),
        ImageSpan(0, n2, 7 + n1 + n2, p2, vlm.grid(config, p2)),
    )
    ours = VisionPrompt(spans, IMAGE_PAD_ID, mrope_table(len(prompt), spans))
    assert np.array_equal(ours.positions, np.array(reference)[:, 0, :])
    assert ours.delta == int(np.array(delta)[0, 0]) != 0


def test_a_row_through_the_batch_cache_gives_mlx_vlms_own_logits(
    tiny_qwen_vl_dir: Path, config: dict[str, Any], model: Any, device: None
) -> None:
    """Prefill in two chunks (virtual ids, features held, positions from the row's cache), then a
    decode step: mlx-vlm's whole-model call on the same prompt, then its own next step."""
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import KVCache

    n, pixels = picture(tiny_qwen_vl_dir, config, (200, 10, 10), (100, 50))
    prompt = [151644, 872, 198, START, *[IMAGE_PAD_ID] * n, END, 3555, 374, 419, 30, 151645, 198]
    first = VIRTUAL_BASE + 4242
    at = prompt.index(IMAGE_PAD_ID)
    virtual = [first + i - at if t == IMAGE_PAD_ID else t for i, t in enumerate(prompt)]
    arrays = {k: mx.array(v) for k, v in pixels.items()}
    theirs = [KVCache() for _ in model.language_model.layers]
    reference = model(mx.array([prompt]), cache=theirs, **arrays).logits
    step = model.language_model(mx.array([[42]]), cache=theirs).logits  # mlx-vlm's decode: its rope deltas
    span = ImageSpan(first, n, at + n, pixels, vlm.grid(config, pixels))
    vision = VisionPrompt((span,), IMAGE_PAD_ID, mrope_table(len(prompt), (span,)))
    served = ImageModel(model)
    row = served.join(7, vision, 0, None)
    assert row is not None and served.holding == 1
    cache = [c.merge([c]) for c in row]  # what mlx-lm's prompt batch makes of a row's caches
    cut = at + 2  # a chunk boundary inside the picture
    ours = mx.concatenate([served(mx.array([virtual[:cut]]), cache), served(mx.array([virtual[cut:]]), cache)], axis=1)
    assert np.allclose(np.array(ours), np.array(reference), atol=1e-4)
    assert np.allclose(np.array(served(mx.array([[42]]), cache)), np.array(step), atol=1e-4)
    plain = model.language_model(mx.array([prompt[:3]])).logits
    text_row = [c.merge([c]) for c in served.join(8, None, 0, None) or []]
    assert np.allclose(np.array(served(mx.array([prompt[:3]]), text_row)), np.array(plain), atol=1e-5)
