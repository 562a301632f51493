"""Every touch of mlx-vlm, in one module (issue 41), as ``mlx_lm_adapter.py`` is for mlx-lm.

mlx-vlm's public API is ``load`` / ``generate`` around its own processors, which return MLX arrays
(an MLX call on whatever thread renders the prompt) and generate one request at a time. Serving a
vision-language model on our one path needs its pieces instead, each typed by a ``Protocol`` of
exactly what is read:

- **loading** (``supported``, ``load_model``): which ``model_type`` mlx-vlm has a module for (found
  on disk, nothing imported), and its ``utils.load_model`` (weights, sanitized, in a ``Model`` whose
  ``language_model`` is the text decoder);
- **the image processor and the prompt's image tokens** (``image_processor``, ``image_tokens``):
  transformers' image processor for the checkpoint (NumPy out, no MLX), and the text one image
  becomes in the prompt — the family's own expansion (Idefics3 / SmolVLM: ``get_image_prompt_string``
  of mlx-vlm's processor module) — so the request thread renders and counts without the device;
- **the model's two halves** (``VisionLanguageModel``): ``get_input_embeddings(ids, pixel_values,
  **pixel kwargs)`` — the image features spliced at the image-token positions — computed on the
  device worker, and ``language_model(inputs, inputs_embeds=, cache=)`` returning ``.logits``,
  whose ``layers`` mlx-lm's ``BatchGenerator`` makes its batch cache for.

``problems(model)`` names what a loaded model lacks of this contract. The contract test
(``tests/engine/test_mlx_vlm_adapter.py``) drives the tiny vision model through every piece: run it
before lifting ``REQUIREMENT``'s upper bound (and the install commands that spell it).

Families served (``FAMILIES``): Idefics3 / SmolVLM (1-D positions) and Qwen2.5-VL, whose text model
takes 3-D position ids (M-RoPE): ``image_tokens`` gives each image's merged grid, from which
``device/rope.py`` makes a row's positions, handed to ``logits`` as ``position_ids`` — so mlx-vlm's
own per-request position state (``_rope_deltas``, ``_position_ids``) is never read. Qwen3-VL (its
vision features also enter deeper layers) and Gemma 3 are refused by name.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "FAMILIES",
    "MROPE",
    "REQUIREMENT",
    "TESTED",
    "VisionLanguageModel",
    "grid",
    "image_processor",
    "image_token",
    "image_tokens",
    "imported",
    "installed",
    "load_model",
    "logits",
    "mrope",
    "problems",
    "supported",
    "text_embeddings",
    "vision_embeddings",
]

TESTED = "0.7"  # the mlx-vlm minor this contract was checked against
REQUIREMENT = "mlx-vlm>=0.7.10,<0.8"  # installed with --no-deps (pyproject.toml's [vision] extra says why)
FAMILIES = ("idefics3", "qwen2_5_vl")  # model types whose prompts and positions this module knows
MROPE = ("qwen2_5_vl",)  # … of which those whose text model takes 3-D position ids


class _Embeddings(Protocol):
    inputs_embeds: Any  # (1, L, D)


class _Output(Protocol):
    logits: Any


class _LanguageModel(Protocol):
    layers: list[Any]

    def __call__(
        self, inputs: Any, inputs_embeds: Any = None, mask: Any = None, cache: Any = None, **kwargs: Any
    ) -> _Output: ...


class _Config(Protocol):
    model_type: str


class VisionLanguageModel(Protocol):
    """An mlx-vlm ``Model``, as far as serving reads it."""

    config: _Config
    language_model: _LanguageModel

    def get_input_embeddings(self, input_ids: Any = None, pixel_values: Any = None, **kwargs: Any) -> _Embeddings: ...


def supported(model_type: str) -> bool:
    """Whether mlx-vlm is installed with a module for ``model_type`` (found on disk; nothing imported)."""
    spec = importlib.util.find_spec("mlx_vlm")
    if spec is None or not spec.submodule_search_locations:
        return False
    return (Path(next(iter(spec.submodule_search_locations))) / "models" / model_type).is_dir()


def installed() -> bool:
    return importlib.util.find_spec("mlx_vlm") is not None


def imported() -> Any:
    """mlx-vlm, imported, without the exit hook its package registers (``atexit``: MLX's streams
    cleared on the main thread at exit — an MLX call off the device thread, whose streams the device
    worker releases itself)."""
    import atexit

    import mlx_vlm

    cleanup = getattr(mlx_vlm, "clear_mlx_streams", None)
    if cleanup is not None:
        atexit.unregister(cleanup)
    return mlx_vlm


def load_model(path: Path) -> VisionLanguageModel:
    """The model in ``path`` (lazy: the caller evaluates it on its device, in its dtype)."""
    imported()
    from mlx_vlm.utils import load_model as _load

    model: VisionLanguageModel = _load(path, lazy=True)
    return model


def problems(model: Any) -> list[str]:
    """What ``model`` lacks of this contract (empty when it serves); no MLX call."""
    found = []
    if not callable(getattr(model, "get_input_embeddings", None)):
        found.append("Model.get_input_embeddings()")
    language = getattr(model, "language_model", None)
    if not callable(language):
        found.append("Model.language_model()")
    elif not isinstance(getattr(language, "layers", None), list):
        found.append("Model.language_model.layers")
    if not isinstance(_image_token_id(model), int):
        found.append("Model.config.image_token_index")
    return found


def _image_token_id(model: Any) -> Any:
    config = getattr(model, "config", None)
    found = getattr(config, "image_token_index", None)
    return found if isinstance(found, int) else getattr(config, "image_token_id", None)


def mrope(model: VisionLanguageModel) -> bool:
    """Whether ``model``'s text model takes 3-D position ids (``logits(positions=)`` on every call)."""
    return str(getattr(model.config, "model_type", "")) in MROPE


def image_processor(path: Path) -> Any:
    """transformers' image processor for the checkpoint (the PIL one: no torch, NumPy out)."""
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(str(path), backend="pil")


def image_token(path: Path, config: dict[str, Any]) -> tuple[str, int]:
    """The placeholder text the chat template writes for an image, and the id of the token whose
    embeddings the image's features replace."""
    del path
    token_id = config.get("image_token_id", config.get("image_token_index"))
    if not isinstance(token_id, int):
        raise ValueError("config.json names no image_token_id")
    return ("<|image_pad|>" if config.get("model_type") in MROPE else "<image>"), token_id


def image_tokens(
    path: Path, config: dict[str, Any], processor: Any, image: Any, *, low: bool = False
) -> tuple[str, dict[str, Any]]:
    """One decoded image (a PIL image) → the prompt text that stands for it (its image tokens and the
    family's markers around them) and its pixel inputs (NumPy arrays, the model's keyword names).
    ``low`` (a client's ``detail: "low"``): the family's one low-resolution view (Idefics3: the
    global image alone, no tiles; Qwen2.5-VL has one view). An M-RoPE family's pixel inputs hold
    its ``image_grid_thw`` (``grid`` reads the merged grid from them)."""
    model_type = str(config.get("model_type"))
    if model_type not in FAMILIES:
        raise ValueError(f"mlx-vlm family '{model_type}' is not served yet")
    if model_type in MROPE:
        out = processor([image], return_tensors="np")
        pixels = {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"]}
        t, h, w = grid(config, pixels)
        return "<|image_pad|>" * (t * h * w), pixels
    imported()
    from mlx_vlm.models.idefics3.processing_idefics3 import get_image_prompt_string

    split = {"do_image_splitting": False} if low else {}
    out = processor([[image]], return_row_col_info=True, return_tensors="np", **split)
    seq_len = int(_processor_config(path).get("image_seq_len", 169))
    text = get_image_prompt_string(
        int(out["rows"][0][0]),
        int(out["cols"][0][0]),
        seq_len,
        image_token="<image>",
        fake_token_around_image="<fake_token_around_image>",
        global_img_token="<global-img>",
    )
    pixels = {"pixel_values": out["pixel_values"]}
    if "pixel_attention_mask" in out:
        pixels["pixel_attention_mask"] = out["pixel_attention_mask"]
    return text, pixels


def grid(config: dict[str, Any], pixels: dict[str, Any]) -> tuple[int, int, int]:
    """An M-RoPE family's image: its token grid (time, height, width) after the spatial merge."""
    merge = int(config.get("vision_config", {}).get("spatial_merge_size", 2))
    t, h, w = (int(v) for v in pixels["image_grid_thw"][0])
    return t, h // merge, w // merge


def _processor_config(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((path / "processor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def vision_embeddings(model: VisionLanguageModel, n_tokens: int, pixels: dict[str, Any]) -> Any:
    """The ``(n_tokens, D)`` features one image's pixel inputs put in place of its image tokens
    (the device thread: the vision tower and connector run here)."""
    import mlx.core as mx

    ids = mx.full((1, n_tokens), _image_token_id(model), dtype=mx.int32)
    arrays = {k: mx.array(v) for k, v in pixels.items()}
    return model.get_input_embeddings(ids, **arrays).inputs_embeds[0]


def text_embeddings(model: VisionLanguageModel, ids: Any) -> Any:
    """The embeddings of token ids ``(B, L)`` (no image among them)."""
    return model.get_input_embeddings(ids).inputs_embeds


def logits(model: VisionLanguageModel, inputs: Any, cache: Any, embeddings: Any = None, positions: Any = None) -> Any:
    """The text model's logits for ``inputs`` (or their ``embeddings``) on the batch ``cache``;
    ``positions``: an M-RoPE model's ``(3, B, L)`` position ids."""
    if positions is None:
        return model.language_model(inputs, inputs_embeds=embeddings, cache=cache).logits
    return model.language_model(inputs, inputs_embeds=embeddings, cache=cache, position_ids=positions).logits
