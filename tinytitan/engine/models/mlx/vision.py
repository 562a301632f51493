"""The vision half of an MLX model directory that takes images (issue 41): prompts and weights.

``Vision.of`` recognises a vision-language checkpoint (a ``vision_config`` in its config, a family
mlx-vlm has). The backend then renders a turn with images (``Turn.parts``) with the model's own chat
template, an ``{"type": "image"}`` entry where each image was; the family's processor turns each
image into its image tokens and pixel inputs (on the CPU pool, no MLX), and each image token becomes
a virtual id derived from the image's digest (``device/images.py``): what the prompt cache keys and
``count_tokens`` counts. Weights load through mlx-vlm on the device thread, as an ``ImageModel``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinytitan.engine import mlx_vlm_adapter as vlm
from tinytitan.engine.device.images import VIRTUAL_BASE, ImageModel, ImageSpan, VisionPrompt, mrope_table
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.request import Image, Turn, ValidatedRequest

__all__ = ["Vision"]

log = logging.getLogger("tinytitan.mlx")

_SPREAD = (1 << 30) - (1 << 24)  # an image's first virtual id lies in [VIRTUAL_BASE, VIRTUAL_BASE + _SPREAD)


class Vision:
    """A vision-language checkpoint's processor and weights (facts read without loading either)."""

    def __init__(self, path: Path, config: dict[str, Any]) -> None:
        self.path = path
        self.config = config
        self.placeholder, self.image_token_id = vlm.image_token(path, config)
        self._processor: Any = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, path: Path, config: dict[str, Any], *, grouped: bool = False) -> Vision | None:
        """The checkpoint's vision half; None for a text model; ``ModelUnavailable`` when it cannot
        serve (``grouped``: as one rank of a distributed group)."""
        if not isinstance(config.get("vision_config"), dict):
            return None
        model_type = str(config.get("model_type"))
        if grouped:
            raise ModelUnavailable(f"'{model_type}' is a vision-language model: not served by a distributed group")
        if not vlm.installed():
            raise ModelUnavailable(
                f"'{model_type}' is a vision-language model and mlx-vlm is not installed: "
                f"pip install --no-deps '{vlm.REQUIREMENT}' && pip install 'tinytitan[mlx,vision]'"
            )
        if model_type not in vlm.FAMILIES or not vlm.supported(model_type):
            served = ", ".join(vlm.FAMILIES)
            raise ModelUnavailable(f"vision-language family '{model_type}' is not served (served: {served})")
        try:
            return cls(path, config)
        except ValueError as exc:
            raise ModelUnavailable(str(exc)) from None

    @staticmethod
    def kv_form(kv: Any, model_id: str) -> None:
        """The KV cache's form for a vision model: full precision (mlx-vlm's attention takes no
        quantized cache), said once where ``--kv-bits`` asked for one."""
        if kv is not None:
            log.warning("%s: a vision model's KV cache is kept in full precision (--kv-bits)", model_id)

    @property
    def processor(self) -> Any:
        if self._processor is None:
            with self._lock:
                if self._processor is None:
                    self._processor = vlm.image_processor(self.path)
        return self._processor

    # -- rendering (the CPU pool) -----------------------------------------------------------------
    def messages(self, request: ValidatedRequest, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (``template_messages``) with every user turn's content as a list of text and
        image entries (vision templates iterate it; SmolVLM's only reads lists), and a tool turn with
        images as its text with the placeholder where each image was."""
        first = len(messages) - len(request.turns)
        out = list(messages)
        for i, turn in enumerate(request.turns):
            if turn.role == "user" or (turn.role == "tool" and turn.parts):
                out[first + i] = {**messages[first + i], "content": self._content(turn)}
        return out

    def _content(self, turn: Turn) -> Any:
        parts = turn.parts or (turn.text,)
        if turn.role == "tool":
            return "".join(self.placeholder if isinstance(p, Image) else p for p in parts)
        return [{"type": "image"} if isinstance(p, Image) else {"type": "text", "text": p} for p in parts if p != ""]

    def tokens(
        self, request: ValidatedRequest, text: str, encode: Callable[[str], list[int]]
    ) -> tuple[list[int], VisionPrompt | None]:
        """The rendered ``text`` (one placeholder per image, in order) → its token ids, each image
        token a virtual id of its image, and what the device needs to compute the features (None:
        no image in the request)."""
        images = [p for t in request.turns for p in t.parts if isinstance(p, Image)]
        if not images:
            return encode(text), None
        pieces = text.split(self.placeholder)
        if len(pieces) > len(images) + 1:
            raise self._spelled(request)
        if len(pieces) < len(images) + 1:
            raise InvalidRequest(
                f"this model's chat template shows {len(pieces) - 1} of the request's {len(images)} images "
                "(a template shows images only in the turns it knows how to)",
                param=request.request.messages_param,
                code="invalid_message",
            )
        expanded, pixels, counts = [pieces[0]], [], []
        mrope = self.config.get("model_type") in vlm.MROPE
        for image, rest in zip(images, pieces[1:], strict=True):
            low = image.detail == "low"
            image_text, image_pixels = vlm.image_tokens(
                self.path, self.config, self.processor, _decoded(image), low=low
            )
            expanded += [image_text, rest]
            pixels.append(image_pixels)
            counts.append(image_text.count(self.placeholder))
        tokens = encode("".join(expanded))
        positions = [i for i, t in enumerate(tokens) if t == self.image_token_id]
        if len(positions) != sum(counts):
            raise self._spelled(request)
        spans, at = [], 0
        for image, n, image_pixels in zip(images, counts, pixels, strict=True):
            first = _first_id(image)
            for j, position in enumerate(positions[at : at + n]):
                tokens[position] = first + j
            grid = vlm.grid(self.config, image_pixels) if mrope else None
            spans.append(ImageSpan(first, n, positions[at + n - 1] + 1, image_pixels, grid))
            at += n
        table = mrope_table(len(tokens), spans) if mrope else None
        return tokens, VisionPrompt(tuple(spans), self.image_token_id, table)

    def _spelled(self, request: ValidatedRequest) -> InvalidRequest:
        """The text itself holds this model's image placeholder: it cannot be told from a picture."""
        return InvalidRequest(
            f"the conversation's text contains this model's image token {self.placeholder!r}; "
            "send pictures as image parts",
            param=request.request.messages_param,
            code="invalid_message",
        )

    # -- weights (the device thread) --------------------------------------------------------------
    def load(self, dtype: str | None) -> ImageModel:
        """The weights (lazy; ``loading.load_vision`` evaluates them) in ``dtype`` (None: the
        checkpoint's own), as the batch's model."""
        import mlx.core as mx

        model = vlm.load_model(self.path)
        if missing := vlm.problems(model):
            raise ModelUnavailable(f"this mlx-vlm lacks {', '.join(missing)} (checked against mlx-vlm {vlm.TESTED})")
        if dtype is not None:
            model.set_dtype(getattr(mx, dtype))  # type: ignore[attr-defined]
        model.eval()  # type: ignore[attr-defined]
        return ImageModel(model)


def _first_id(image: Image) -> int:
    """The picture's first virtual id: its content, and the view asked for (a low-detail view's
    tokens are other features than the tiled one's)."""
    key = image.digest if image.detail != "low" else hashlib.sha256(f"{image.digest}:low".encode()).hexdigest()
    return VIRTUAL_BASE + int(key[:16], 16) % _SPREAD


def _decoded(image: Image) -> Any:
    """The image as the processor takes it (RGB); the wire half checked that it decodes."""
    from PIL import Image as PILImage

    with PILImage.open(io.BytesIO(image.data)) as opened:
        opened.seek(0)  # an animated GIF or WebP: its first frame
        return opened.convert("RGB")
