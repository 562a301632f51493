"""The quantized batch cache (``kv/cache.py``) against mlx-lm's ``BatchKVCache`` holding the same numbers:
every operation mlx-lm's generator drives (merge, update, mask, filter, extend, trim, extract,
prepare / finalize) leaves both with the same keys, values, offsets and masks."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mlx_lm.models.cache import BatchKVCache, KVCache

from tinytitan.engine.kv.cache import (
    DENSE_FROM,
    FullRow,
    QuantizedBatchKVCache,
    QuantizedRow,
    dequantized,
    row_caches,
)
from tinytitan.engine.kv.form import KvForm

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker

HEADS, DIM = 2, 64


def rand(rows: int, n: int, seed: int) -> Any:
    return mx.random.normal((rows, HEADS, n, DIM), key=mx.random.key(seed))


def qdq(x: Any, form: KvForm) -> Any:
    """``x`` as a quantized cache gives it back: quantized, then dequantized."""
    parts = mx.quantize(x, group_size=form.group_size, bits=form.bits)
    return mx.dequantize(*parts, group_size=form.group_size, bits=form.bits)


def dense(fetched: Any, form: KvForm) -> Any:
    """What an update returned, as numbers (a quantized triple is dequantized)."""
    return dequantized(fetched, form) if isinstance(fetched, tuple) else fetched


def rows_of(lengths: list[int], form: KvForm, seed: int = 0) -> tuple[list[Any], list[Any]]:
    """The same rows twice: ``QuantizedRow``\\ s and ``KVCache``\\ s holding what quantizing gives back."""
    ours, ref = [], []
    for i, n in enumerate(lengths):
        row, plain = QuantizedRow(form), KVCache()
        if n:
            x = rand(1, n, seed + i)
            row.update_and_fetch(x, -x)
            plain.update_and_fetch(qdq(x, form), qdq(-x, form))
        ours.append(row)
        ref.append(plain)
    return ours, ref


def same(ours: Any, ref: Any, form: KvForm) -> None:
    assert mx.array_equal(dense(ours[0], form), ref[0]) and mx.array_equal(dense(ours[1], form), ref[1])


def step(ours: QuantizedBatchKVCache, ref: BatchKVCache, n: int, seed: int, form: KvForm) -> None:
    rows = int(ref.offset.shape[0])
    x = rand(rows, n, seed)
    assert mx.array_equal(ours.make_mask(n, return_array=True), ref.make_mask(n, return_array=True))
    same(ours.update_and_fetch(x, -x), ref.update_and_fetch(qdq(x, form), qdq(-x, form)), form)
    assert ours.offset.tolist() == ref.offset.tolist() and ours.size() == ref.size()


@pytest.mark.parametrize("bits", [4, 8])
def test_every_operation_leaves_the_numbers_batchkvcache_would_hold(bits: int) -> None:
    form = KvForm(bits, 32)
    rows, plain = rows_of([5, 9, 0], form)
    ours, ref = QuantizedBatchKVCache.merge(rows), BatchKVCache.merge(plain)
    assert ours.left_padding.tolist() == ref.left_padding.tolist() == [4, 0, 9]
    for i in range(3):
        step(ours, ref, 1, 10 + i, form)  # decode steps
    ours.filter([0, 2])
    ref.filter([0, 2])  # the longest row left: the padding every row still had is cut
    assert ours.left_padding.tolist() == ref.left_padding.tolist() and ours.size() == ref.size()
    step(ours, ref, 1, 20, form)
    more, more_plain = rows_of([12], form, seed=30)
    other, other_ref = QuantizedBatchKVCache.merge(more), BatchKVCache.merge(more_plain)
    ours.extend(other)
    ref.extend(other_ref)
    step(ours, ref, 4, 40, form)  # a drafts' verify pass: 4 tokens
    assert ours.trim(3) == ref.trim(3) == 3  # the rejected drafts
    step(ours, ref, 1, 50, form)
    for i in range(3):
        row, plain_row = ours.extract(i), ref.extract(i)
        assert isinstance(row, QuantizedRow) and row.offset == plain_row.offset == row.size()
        keys, values = row.keys_and_values()
        same((keys, values), (plain_row.keys, plain_row.values), form)


def test_a_prefill_chunk_attends_over_dequantized_keys_and_a_decode_step_over_quantized_ones() -> None:
    """mlx-lm's attention goes the quantized way exactly when the cache has ``bits``."""
    form = KvForm(4, 64)
    cache = QuantizedBatchKVCache.merge([QuantizedRow(form)])
    keys, _values = cache.update_and_fetch(rand(1, DENSE_FROM + 1, 1), rand(1, DENSE_FROM + 1, 2))
    assert not hasattr(cache, "bits") and isinstance(keys, mx.array) and keys.shape[2] == DENSE_FROM + 1
    keys, _values = cache.update_and_fetch(rand(1, 1, 3), rand(1, 1, 4))
    assert cache.bits == 4 and isinstance(keys, tuple) and len(keys) == 3  # (packed, scales, biases)
    assert keys[0].dtype == mx.uint32 and keys[0].shape[-1] == DIM * 4 // 32


def test_a_batch_is_kept_in_full_precision_until_it_holds_the_start() -> None:
    form = KvForm(8, 32, start=10)
    first, second = FullRow(form), FullRow(form)
    x = rand(1, 5, 1)
    first.update_and_fetch(x, -x)
    batch = QuantizedBatchKVCache.merge([first, second])
    assert not batch.quantized
    y = rand(2, 4, 2)
    keys, _ = batch.update_and_fetch(y, -y)  # 9 tokens: still full precision, exactly as given
    assert not batch.quantized and mx.array_equal(keys[0:1, :, 0:5], x) and mx.array_equal(keys[:, :, 5:9], y)
    z = rand(2, 1, 3)
    keys, _ = batch.update_and_fetch(z, -z)  # the tenth: everything held is quantized now, every row
    assert batch.quantized and batch.bits == 8
    assert mx.array_equal(dense(keys, form)[0:1, :, 0:5], qdq(x, form))
    assert isinstance(batch.extract(0), QuantizedRow)
    batch.trim(2)  # a rewind below the start keeps it quantized
    assert batch.quantized and batch.size() == 8


def test_a_quantized_row_makes_the_batch_it_joins_quantized() -> None:
    form = KvForm(8, 32, start=1000)
    short = FullRow(form)
    x = rand(1, 3, 1)
    short.update_and_fetch(x, -x)
    (quantized,), _ = rows_of([4], form, seed=2)
    full = QuantizedBatchKVCache.merge([short])
    assert not full.quantized
    full.extend(QuantizedBatchKVCache.merge([quantized]))
    assert full.quantized and full.left_padding.tolist() == [1, 0]
    merged = QuantizedBatchKVCache.merge([short, quantized])
    assert merged.quantized and isinstance(merged.extract(0), QuantizedRow)


def test_a_right_padded_prefill_is_rolled_into_left_padding_as_batchkvcache_does() -> None:
    form = KvForm(8, 32)
    rows, plain = rows_of([0, 0], form)
    ours, ref = QuantizedBatchKVCache.merge(rows), BatchKVCache.merge(plain)
    for cache in (ours, ref):
        cache.prepare(lengths=[6, 3], right_padding=[0, 3])
    step(ours, ref, 6, 1, form)
    ours.finalize()
    ref.finalize()
    assert ours.left_padding.tolist() == ref.left_padding.tolist() == [0, 3]
    assert ours.offset.tolist() == ref.offset.tolist() == [6, 3]
    step(ours, ref, 1, 2, form)


def test_quantized_at_4_bits_a_batch_holds_under_a_third_of_the_bytes() -> None:
    form = KvForm(4, 64)
    rows, plain = rows_of([300, 200], form)
    ours, ref = QuantizedBatchKVCache.merge(rows), BatchKVCache.merge(plain)
    assert ours.nbytes <= 0.3 * ref.nbytes


def test_a_new_rows_caches_replace_only_the_plain_kv_layers() -> None:
    from mlx_lm.models.cache import ArraysCache

    class Model:
        def __init__(self) -> None:
            self.layers = [object(), object()]

        def make_cache(self) -> list[Any]:
            return [KVCache(), ArraysCache(1)]

    kept = row_caches(Model(), KvForm(8))
    assert isinstance(kept[0], QuantizedRow) and isinstance(kept[1], ArraysCache)
    assert isinstance(row_caches(Model(), KvForm(8, start=5))[0], FullRow)
