"""A KV cache that is quantized and still batches: ``QuantizedBatchKVCache`` and its rows.

mlx-lm 0.32's ``BatchKVCache`` (the cache its ``BatchGenerator`` shares among rows) has no quantized
variant, so ``mlx_lm.server --kv-bits`` turns batching off. This module is that variant. It keeps
``BatchKVCache``'s contract — rows left-padded to a common length, ``offset`` per row (the RoPE
position), ``prepare`` / ``finalize`` around a right-padded prefill, ``filter`` / ``extend`` as rows
leave and join, ``extract`` of one row, ``merge`` of rows into a batch, ``trim`` (drafts rewind) —
over keys and values stored as ``mx.quantize`` makes them, ``(packed, scales, biases)``, as
``QuantizedKVCache`` stores them. Quantization is per token (the groups run along a head's vector),
so what a row holds does not depend on who shares its batch or how its prompt was chunked.

Attention: a step of at most ``DENSE_FROM`` new tokens (a decode step, a drafts' verify pass) gets
the quantized tuples and the cache shows ``bits``, so mlx-lm's ``scaled_dot_product_attention``
takes its quantized path (``quantized_matmul`` over the packed keys: the memory saving is also a
bandwidth saving). A longer chunk (a prefill) gets the keys and values dequantized — the same
numbers the quantized path multiplies by — and the cache hides ``bits`` for it, so the chunk goes
through ``mx.fast.scaled_dot_product_attention``: a fused kernel on a GPU, and on a CPU the NumPy
prompt attention (``models/mlx/cpu_attention.py``), which only takes full-precision keys.
Dequantizing a chunk's keys costs one pass over them, small beside the chunk's products with them.

``quantized_kv_start`` (``KvForm.start``): a batch keeps full precision while it holds fewer
tokens, and quantizes everything it holds — for every row — once it reaches that many; a row that
joins a quantized batch, or a quantized row that joins a full-precision one, makes the whole batch
quantized. With the default start of 0 every row is quantized from its first token.

Rows: ``QuantizedRow`` (mlx-lm's ``QuantizedKVCache``) and ``FullRow`` (its ``KVCache``), each
knowing its ``KvForm``; ``merge`` of either makes this batch cache (mlx-lm's generator merges a
prompt's row caches through the first one's ``merge``). They are what a batch ``extract``\\ s for a
leaving row, what the prompt cache keeps and the disk tier writes. Everything runs on the device
thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlx_lm.models.cache import KVCache, QuantizedKVCache

from tinytitan.engine.kv.form import KvForm

__all__ = ["DENSE_FROM", "FullRow", "QuantizedBatchKVCache", "QuantizedRow", "dequantized", "row_caches"]

DENSE_FROM = 32  # steps of more new tokens than this attend over dequantized keys (prefill chunks)
STEP = 256  # tokens of room added at a time (mlx-lm's caches grow alike)

Parts = tuple[Any, ...]  # (array,) in full precision; (packed, scales, biases) quantized


class QuantizedRow(QuantizedKVCache):  # type: ignore[misc]
    """One row's quantized KV cache (mlx-lm's ``QuantizedKVCache``) that batches as ``QuantizedBatchKVCache``."""

    def __init__(self, form: KvForm) -> None:
        super().__init__(group_size=form.group_size, bits=form.bits)
        self.form = form

    def size(self) -> int:
        return int(self.offset)

    @classmethod
    def merge(cls, caches: Sequence[Any]) -> QuantizedBatchKVCache:
        return QuantizedBatchKVCache.merge(caches)


class FullRow(KVCache):  # type: ignore[misc]
    """One row's full-precision KV cache, before its batch reached ``quantized_kv_start``."""

    def __init__(self, form: KvForm) -> None:
        super().__init__()
        self.form = form

    @classmethod
    def merge(cls, caches: Sequence[Any]) -> QuantizedBatchKVCache:
        return QuantizedBatchKVCache.merge(caches)


def row_caches(model: Any, form: KvForm) -> list[Any]:
    """A new row's caches for ``model`` in ``form``: mlx-lm's own (``make_prompt_cache``), with every
    plain ``KVCache`` layer in this module's rows (a sliding-window or recurrent layer stays as it is)."""
    from mlx_lm.models.cache import make_prompt_cache

    row = QuantizedRow if form.start <= 0 else FullRow
    return [row(form) if type(c) is KVCache else c for c in make_prompt_cache(model)]


def dequantized(parts: Parts, form: KvForm) -> Any:
    """``(packed, scales, biases)`` back to numbers: what the quantized attention multiplies by."""
    import mlx.core as mx

    packed, scales, biases = parts
    return mx.dequantize(packed, scales, biases, group_size=form.group_size, bits=form.bits)


def _row_parts(cache: Any, quantized: bool) -> tuple[Parts, Parts] | None:
    """A row's keys and values (its first ``offset`` tokens) as parts of the given form; None when empty."""
    import mlx.core as mx

    if cache.keys is None or not cache.offset:
        return None
    n = cache.offset
    if isinstance(cache, QuantizedKVCache):
        return tuple(x[..., :n, :] for x in cache.keys), tuple(x[..., :n, :] for x in cache.values)
    keys, values = cache.keys[..., :n, :], cache.values[..., :n, :]
    if quantized:
        form: KvForm = cache.form
        return (
            tuple(mx.quantize(keys, group_size=form.group_size, bits=form.bits)),
            tuple(mx.quantize(values, group_size=form.group_size, bits=form.bits)),
        )
    return (keys,), (values,)


class QuantizedBatchKVCache:
    """``BatchKVCache``'s contract over quantized keys and values (one per layer, every row in it)."""

    def __init__(self, left_padding: list[int], form: KvForm) -> None:
        import mlx.core as mx

        self.form = form
        self.group_size = form.group_size
        self.quantized = form.start <= 0  # False: full precision until the batch holds form.start tokens
        self.keys: Parts | None = None  # room for _idx tokens and more, per part
        self.values: Parts | None = None
        self.left_padding: Any = mx.array(left_padding)  # (rows,)
        self.offset: Any = mx.array([-p for p in left_padding])  # (rows,) each row's next position
        self._idx = 0
        self._right_padding: Any = None
        self._dense = True  # the last update's attention takes dequantized keys (no ``bits`` then)

    @property
    def bits(self) -> int:
        """Only while the attention should take the quantized keys: mlx-lm's ``scaled_dot_product_attention``
        goes the quantized way exactly when the cache has a ``bits`` attribute."""
        if not self.quantized or self._dense:
            raise AttributeError("bits")
        return self.form.bits

    # -- writing ----------------------------------------------------------------------------------
    def _quantize(self, x: Any) -> Parts:
        import mlx.core as mx

        return tuple(mx.quantize(x, group_size=self.form.group_size, bits=self.form.bits))

    def _go_quantized(self) -> None:
        """Quantize what the batch holds (every row); from now on it stays quantized."""
        if self.quantized:
            return
        self.quantized = True
        if self.keys is not None and self.values is not None:
            self.keys = self._quantize(self.keys[0][..., : self._idx, :])
            self.values = self._quantize(self.values[0][..., : self._idx, :])

    def update_and_fetch(self, keys: Any, values: Any) -> tuple[Any, Any]:
        import mlx.core as mx

        n = keys.shape[2]
        prev = self._idx
        if not self.quantized and prev + n >= self.form.start:
            self._go_quantized()
        new_k = self._quantize(keys) if self.quantized else (keys,)
        new_v = self._quantize(values) if self.quantized else (values,)
        if self.keys is None or self.values is None or prev + n > self.keys[0].shape[2]:
            room = (STEP + n - 1) // STEP * STEP

            def grow(old: Parts | None, new: Parts) -> Parts:
                fresh = tuple(mx.zeros((*x.shape[:2], room, x.shape[3]), dtype=x.dtype) for x in new)
                if old is None:
                    return fresh
                if prev % STEP:
                    old = tuple(x[..., :prev, :] for x in old)
                return tuple(mx.concatenate([x, f], axis=2) for x, f in zip(old, fresh, strict=True))

            self.keys, self.values = grow(self.keys, new_k), grow(self.values, new_v)
        self.offset = self.offset + n
        self._idx += n
        for stored, new in ((self.keys, new_k), (self.values, new_v)):
            for x, part in zip(stored, new, strict=True):
                x[..., prev : self._idx, :] = part
        self._dense = n > DENSE_FROM
        return self._fetch()

    def _fetch(self) -> tuple[Any, Any]:

        assert self.keys is not None and self.values is not None
        keys = tuple(x[..., : self._idx, :] for x in self.keys)
        values = tuple(x[..., : self._idx, :] for x in self.values)
        if not self.quantized:
            return keys[0], values[0]
        if self._dense:
            return dequantized(keys, self.form), dequantized(values, self.form)
        return keys, values

    # -- BatchKVCache's contract ------------------------------------------------------------------
    def prepare(self, *, left_padding: Any = None, lengths: Any = None, right_padding: Any = None) -> None:
        import mlx.core as mx

        if left_padding is not None:
            if self.keys is not None:
                raise ValueError("Left padding can only be added to an empty batch cache")
            padding = mx.array(left_padding)
            self.left_padding = self.left_padding + padding
            self.offset = self.offset - padding
        if right_padding is not None and max(right_padding) > 0:
            self._right_padding = mx.array(right_padding)

    def finalize(self) -> None:
        from mlx_lm.models.cache import dynamic_roll

        if self._right_padding is None:
            return
        padding = self._right_padding
        if self.keys is not None and self.values is not None:
            self.keys = tuple(dynamic_roll(x, padding[:, None], axis=2) for x in self.keys)
            self.values = tuple(dynamic_roll(x, padding[:, None], axis=2) for x in self.values)
        self.offset = self.offset - padding
        self.left_padding = self.left_padding + padding
        self._right_padding = None

    @property
    def state(self) -> tuple[Any, ...]:
        """Every array the cache holds (mlx-lm evaluates them after a prefill)."""
        return (*(self.keys or ()), *(self.values or ()), self.offset, self.left_padding)

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        n = min(self._idx, n)
        self._idx -= n
        self.offset = self.offset - n
        return n

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> Any:
        from mlx_lm.models.base import create_causal_mask

        from tinytitan.engine.kv.masks import lone_row

        if lone_row(self, N, return_array=return_array, window_size=kwargs.get("window_size")):
            return None  # one row, no padding, one token: every position is seen (masks.py)
        return create_causal_mask(N, offset=self._idx, left_padding=self.left_padding, **kwargs)

    def filter(self, batch_indices: Any) -> None:
        """Keep only the rows ``batch_indices``; the left padding every row still has is cut."""
        if self.keys is not None and self.values is not None:
            self.keys = tuple(x[batch_indices] for x in self.keys)
            self.values = tuple(x[batch_indices] for x in self.values)
        self.offset = self.offset[batch_indices]
        self.left_padding = self.left_padding[batch_indices]
        padding: list[int] = self.left_padding.tolist()
        cut = min(padding)
        if cut > 0:
            if self.keys is not None and self.values is not None:
                self.keys = tuple(x[..., cut:, :] for x in self.keys)
                self.values = tuple(x[..., cut:, :] for x in self.values)
            self._idx -= cut
            self.left_padding = self.left_padding - cut

    def extend(self, other: QuantizedBatchKVCache) -> None:
        """Append ``other``'s rows, both right-aligned at the longer one's length (one form for all)."""
        import mlx.core as mx

        if self.quantized or other.quantized or max(self._idx, other._idx) >= self.form.start:
            self._go_quantized()
            other._go_quantized()
        if self.keys is None and other.keys is None:
            self.left_padding = mx.concatenate([self.left_padding, other.left_padding])
            self.offset = mx.concatenate([self.offset, other.offset])
            return
        like_k = self.keys if self.keys is not None else other.keys
        like_v = self.values if self.values is not None else other.values
        assert like_k is not None and like_v is not None
        longest = max(self._idx, other._idx)
        size = max(c.keys[0].shape[2] for c in (self, other) if c.keys is not None)

        def aligned(c: QuantizedBatchKVCache) -> tuple[Parts, Parts, Any, Any]:
            rows = c.offset.shape[0]
            keys = c.keys or tuple(mx.zeros((rows, x.shape[1], 0, x.shape[3]), dtype=x.dtype) for x in like_k)
            values = c.values or tuple(mx.zeros((rows, x.shape[1], 0, x.shape[3]), dtype=x.dtype) for x in like_v)
            left = longest - c._idx
            right = size - keys[0].shape[2] - left
            if right < 0:
                keys, values = tuple(x[..., :right, :] for x in keys), tuple(x[..., :right, :] for x in values)
                right = 0
            if left or right:
                pad = [(0, 0), (0, 0), (left, right), (0, 0)]
                keys, values = tuple(mx.pad(x, pad) for x in keys), tuple(mx.pad(x, pad) for x in values)
            return keys, values, c.offset, c.left_padding + left

        (k1, v1, o1, p1), (k2, v2, o2, p2) = aligned(self), aligned(other)
        self.keys = tuple(mx.concatenate([a, b]) for a, b in zip(k1, k2, strict=True))
        self.values = tuple(mx.concatenate([a, b]) for a, b in zip(v1, v2, strict=True))
        self.offset = mx.concatenate([o1, o2])
        self.left_padding = mx.concatenate([p1, p2])
        self._idx = longest

    def extract(self, idx: int) -> QuantizedRow | FullRow:
        """Row ``idx`` alone, without its padding: a ``QuantizedRow`` (a ``FullRow`` before ``start``)."""
        import mlx.core as mx

        row: QuantizedRow | FullRow = QuantizedRow(self.form) if self.quantized else FullRow(self.form)
        if self.keys is None or self.values is None:
            return row
        paddings: list[int] = self.left_padding.tolist()
        padding = paddings[idx]
        keys = tuple(mx.contiguous(x[idx : idx + 1, :, padding : self._idx]) for x in self.keys)
        values = tuple(mx.contiguous(x[idx : idx + 1, :, padding : self._idx]) for x in self.values)
        if isinstance(row, QuantizedRow):
            row.keys, row.values = keys, values
        else:
            row.keys, row.values = keys[0], values[0]
        row.offset = self._idx - padding
        return row

    @classmethod
    def merge(cls, caches: Sequence[Any]) -> QuantizedBatchKVCache:
        """Rows (``QuantizedRow`` / ``FullRow`` of one form) as one batch, left-padded to the longest."""
        import mlx.core as mx

        form: KvForm = caches[0].form
        lengths = [int(c.offset) if c.keys is not None else 0 for c in caches]
        longest = max(lengths)
        if longest == 0:
            return cls([0] * len(caches), form)
        quantized = (
            form.start <= 0
            or longest >= form.start
            or any(isinstance(c, QuantizedKVCache) and n for c, n in zip(caches, lengths, strict=True))
        )
        parts = [_row_parts(c, quantized) for c in caches]
        like_k, like_v = next(p for p in parts if p is not None)
        padding = [longest - n for n in lengths]

        def joined(like: Parts, which: int) -> Parts:
            out = []
            for j, x in enumerate(like):
                whole = mx.zeros((len(caches), x.shape[1], longest, x.shape[3]), dtype=x.dtype)
                for i, (pad, row) in enumerate(zip(padding, parts, strict=True)):
                    if row is not None:
                        whole[i : i + 1, :, pad:longest] = row[which][j]
                out.append(whole)
            return tuple(out)

        cache = cls(padding, form)
        cache.quantized = quantized
        cache.keys, cache.values = joined(like_k, 0), joined(like_v, 1)
        cache.offset = cache.offset + longest
        cache._idx = longest
        return cache

    # -- sizes ------------------------------------------------------------------------------------
    def size(self) -> int:
        return self._idx

    def empty(self) -> bool:
        return self.keys is None

    @property
    def nbytes(self) -> int:
        return sum(int(x.nbytes) for x in (*(self.keys or ()), *(self.values or ())))
