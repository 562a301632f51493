"""Images in the batch: a vision-language model as mlx-lm's ``BatchGenerator`` sees a text model (issue 41).

A prompt with images holds, at each image token's position, a *virtual id* (``VIRTUAL_BASE`` and
up, derived from the image's digest: ``models/mlx/vision.py``) instead of the model's image token.
So the row is plain token ids everywhere else: the queue, the prompt cache and its disk tier key it
by them (the same picture twice is the same ids, a different one never), ``count_tokens`` counts
them, and mlx-lm prefills it in chunks like text.

``ImageModel`` is the model the batch drives. When a row with images joins (``admit``, on the
device thread), the vision tower turns each image the prompt cache did not already cover into its
features, kept by virtual id; a call whose inputs hold virtual ids embeds the others as text and
puts those features in their place, then runs the text model (only a one-row call can hold a
prompt chunk: a decode step of several rows goes straight through). A row lets its features go once its
prompt is in (``release``); the latest ``RECENT`` pictures' stay, for a picture sent again behind
another prefix. While no row holds features, a call is the text model's own (no
look at the inputs, no host sync).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tinytitan.engine import mlx_vlm_adapter as vlm

__all__ = ["VIRTUAL_BASE", "ImageModel", "ImageSpan", "VisionPrompt", "mrope_table"]

VIRTUAL_BASE = 1 << 30  # no vocabulary comes near it; ids stay int32
RECENT = 8  # pictures whose features ``ImageModel`` keeps after their rows' prompts are in


@dataclass(frozen=True, slots=True)
class ImageSpan:
    """One image in a prompt: its first virtual id, its token count, the position after its last
    image token, and its pixel inputs (NumPy arrays, made on the request thread)."""

    first: int
    n_tokens: int
    end: int
    pixels: dict[str, Any] = field(repr=False)
    grid: tuple[int, int, int] | None = None  # an M-RoPE family's merged (time, height, width) grid


@dataclass(frozen=True, slots=True)
class VisionPrompt:
    """What a prompt with images carries to the device (``Prompt.vision``)."""

    spans: tuple[ImageSpan, ...]
    image_token_id: int  # what a virtual id means to a logits processor (penalties)
    positions: Any = field(default=None, repr=False)  # an M-RoPE family's (3, T) ids (``mrope_table``)

    @property
    def delta(self) -> int:
        """An M-RoPE prompt's position id past its end, less its length (0 without ``positions``)."""
        if self.positions is None:
            return 0
        return int(self.positions.max()) + 1 - int(self.positions.shape[1])


def mrope_table(length: int, spans: Sequence[ImageSpan]) -> Any:
    """The ``(3, length)`` M-RoPE position ids (NumPy) of a prompt with images ``spans`` (each with its
    ``grid``): the 1-D index for text, continuing after each picture from its largest id + 1, and
    inside a picture its tokens' (time, height, width) coordinates offset by the text before it."""
    import numpy as np

    table = np.empty((3, length), dtype=np.int32)
    at = nxt = 0  # the next token's index, the next text position id
    for span in spans:
        assert span.grid is not None
        start = span.end - span.n_tokens
        table[:, at:start] = nxt + np.arange(start - at)
        base = nxt + start - at
        table[:, start : span.end] = base + np.indices(span.grid).reshape(3, -1)
        at, nxt = span.end, base + max(span.grid)
    table[:, at:] = nxt + np.arange(length - at)
    return table


class ImageModel:
    """``model`` (an mlx-vlm ``Model``) with the interface mlx-lm's generator and our batch call."""

    def __init__(self, model: vlm.VisionLanguageModel, recent: int = RECENT) -> None:
        self.vlm = model
        self._held: dict[int, list[tuple[int, int, Any]]] = {}  # row id → (first, n, features) spans
        # the latest pictures' features by (first virtual id, tokens): a screenshot sent again after
        # the prefix before it changed (the prompt cache misses) skips the vision tower
        self._recent: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._keep = recent
        self.computed = 0  # pictures through the vision tower, ever (tests)
        self.mrope = vlm.mrope(model)  # 3-D positions, carried per row on its cache (rope.py)

    @property
    def layers(self) -> list[Any]:
        return self.vlm.language_model.layers

    # -- rows (the device thread) ----------------------------------------------------------------
    def join(self, row_id: int, vision: VisionPrompt | None, reused: int, cache: list[Any] | None) -> list[Any] | None:
        """A row joins the batch with ``cache`` (its prompt-cache hit, or None): its pictures'
        features are made (``admit``), and an M-RoPE model's row cache carries its positions."""
        if vision is not None:
            self.admit(row_id, vision, reused)
        if not self.mrope:
            return cache
        import mlx.core as mx
        from mlx_lm.models.cache import KVCache

        from tinytitan.engine.device import rope

        if cache is None:
            cache = [KVCache() for _ in self.layers]
        if vision is None or vision.positions is None:
            return rope.tagged(cache, rope.PLAIN)
        return rope.tagged(cache, rope.Rope(mx.array(vision.positions), vision.delta))

    def admit(self, row_id: int, vision: VisionPrompt, reused: int) -> None:
        """Compute the features of every image in ``vision`` the first ``reused`` tokens (a prompt-cache
        hit) do not cover, and hold them until ``release(row_id)``."""
        import mlx.core as mx

        spans = []
        for span in vision.spans:
            if span.end <= reused:
                continue  # its tokens' KV state came from the cache
            key = (span.first, span.n_tokens)
            features = self._recent.pop(key, None)
            if features is None:
                features = vlm.vision_embeddings(self.vlm, span.n_tokens, span.pixels)
                mx.eval(features)
                self.computed += 1
            self._recent[key] = features
            while len(self._recent) > self._keep:
                self._recent.popitem(last=False)
            spans.append((span.first, span.n_tokens, features))
        if spans:
            self._held[row_id] = spans

    def release(self, row_id: int) -> None:
        self._held.pop(row_id, None)

    @property
    def holding(self) -> int:
        """Rows whose image features are held (tests)."""
        return len(self._held)

    # -- the model call (mlx-lm's generator, the device thread) ----------------------------------
    def __call__(self, inputs: Any, cache: Any = None, input_embeddings: Any = None) -> Any:
        # a prompt is prefilled alone (``MlxBatch``: a prefill batch of 1), so a call of several rows
        # is a decode step — sampled tokens, never a virtual id — and needs no look (no host sync)
        if input_embeddings is None and self._held and inputs.shape[0] == 1:
            input_embeddings = self._embed(inputs)
        positions = None
        if self.mrope:
            from tinytitan.engine.device import rope

            if (ropes := rope.rope_of(cache)) is not None:
                positions = rope.positions(ropes, cache[0].offset, inputs.shape[1])
        return vlm.logits(self.vlm, inputs, cache, input_embeddings, positions)

    def _embed(self, inputs: Any) -> Any:
        """Text embeddings for ``inputs`` ``(B, L)``, held features at virtual ids; None without any."""
        import mlx.core as mx
        import numpy as np

        ids = np.asarray(inputs).astype(np.int64)
        virtual = ids >= VIRTUAL_BASE
        if not virtual.any():
            return None
        text = vlm.text_embeddings(self.vlm, mx.array(np.where(virtual, 0, ids).astype(np.int32)))
        flat = text.reshape(-1, text.shape[-1])
        flat_ids = ids.reshape(-1)
        for spans in self._held.values():
            for first, n, features in spans:
                at = np.flatnonzero((flat_ids >= first) & (flat_ids < first + n))
                if at.size:
                    flat[mx.array(at)] = features[mx.array(flat_ids[at] - first)].astype(flat.dtype)
        return flat.reshape(text.shape)


def penalty_tokens(tokens: Sequence[int], vision: VisionPrompt) -> list[int]:
    """``tokens`` as a logits processor may index logits by: virtual ids as the image token."""
    return [vision.image_token_id if t >= VIRTUAL_BASE else t for t in tokens]
