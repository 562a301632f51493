"""A lone row's decode step without a mask (``kv/masks.py``): when it is taken, and that it changes no number."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import pytest
from mlx_lm.models.cache import BatchKVCache, KVCache

from tinytitan.engine.kv import masks
from tinytitan.engine.kv.cache import QuantizedBatchKVCache
from tinytitan.engine.kv.form import KvForm

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker


@pytest.fixture(scope="module")
def tiny_model(tiny_dir: Any) -> Any:
    from mlx_lm import load

    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True):
        loaded, _tok = load(str(tiny_dir))
    return loaded


def restore(was: bool) -> None:
    if was:
        masks.install()
    else:
        masks.uninstall()


@pytest.fixture
def ours() -> Iterator[None]:
    """Our ``make_mask`` installed for the test, and the process left as it was."""
    was = masks.installed()
    masks.install()
    yield
    restore(was)


@pytest.fixture
def theirs() -> Iterator[None]:
    """mlx-lm's own ``make_mask`` for the test, and the process left as it was."""
    was = masks.installed()
    masks.uninstall()
    yield
    restore(was)


def filled(left_padding: list[int], n: int) -> BatchKVCache:
    cache = BatchKVCache(left_padding)
    x = mx.random.normal((len(left_padding), 2, n, 8), key=mx.random.key(1))
    cache.update_and_fetch(x, -x)
    return cache


@pytest.mark.parametrize(
    ("left_padding", "n", "kwargs", "lone"),
    [
        ([0], 1, {}, True),
        ([0], 1, {"window_size": None}, True),
        ([0], 2, {}, False),  # a chunk: causal among its own tokens
        ([0], 1, {"return_array": True}, False),
        ([0], 1, {"window_size": 4}, False),
        ([0, 0], 1, {}, False),
        ([0, 3], 1, {}, False),
        ([2], 1, {}, False),  # padding mlx-lm has not cut yet
    ],
)
def test_only_one_unpadded_row_at_one_token_goes_without(
    left_padding: list[int], n: int, kwargs: dict[str, Any], lone: bool
) -> None:
    assert masks.lone_row(filled(left_padding, 5), n, **kwargs) is lone


def test_where_it_goes_without_mlx_lms_mask_would_mask_nothing(theirs: None) -> None:
    cache = filled([0], 7)
    mask = cache.make_mask(1)
    assert mask.shape[-1] == 8 and bool(mx.all(mask).item())  # the new token sees all 7 and itself


def test_installed_mlx_lms_batch_cache_gives_none_for_a_lone_row_and_its_own_mask_otherwise(ours: None) -> None:
    assert filled([0], 7).make_mask(1) is None
    mask = filled([0, 3], 7).make_mask(1)
    assert mask is not None and mask.shape == (2, 1, 1, 8)
    assert mask[1, 0, 0, :3].tolist() == [False] * 3  # the padded row still masks its padding


def test_install_is_idempotent_and_uninstall_restores_mlx_lms_own(theirs: None) -> None:
    own = BatchKVCache.make_mask
    masks.install()
    masks.install()
    assert BatchKVCache.make_mask is not own and masks.installed()
    masks.uninstall()
    assert BatchKVCache.make_mask is own and not masks.installed()


def test_a_lone_rows_decode_gives_the_same_logits_with_and_without_its_mask(tiny_model: Any) -> None:
    prompt = mx.array([list(range(100, 140))])

    def decode() -> Any:
        cache = [BatchKVCache([0]) for _ in tiny_model.layers]
        tiny_model(prompt, cache=cache)
        return [tiny_model(mx.array([[t]]), cache=cache) for t in (7, 8, 9)]

    was = masks.installed()
    masks.uninstall()
    try:
        with_mask = decode()
        masks.install()
        without = decode()
    finally:
        if not was:
            masks.uninstall()
    assert all(mx.array_equal(a, b) for a, b in zip(with_mask, without, strict=True))


def test_the_quantized_batch_cache_goes_without_for_a_lone_row_too() -> None:
    form = KvForm(bits=8, group_size=64, start=0)
    lone, two = QuantizedBatchKVCache([0], form), QuantizedBatchKVCache([0, 2], form)
    x = mx.random.normal((1, 2, 5, 64), key=mx.random.key(2))
    lone.update_and_fetch(x, x)
    two.update_and_fetch(mx.concatenate([x, x]), mx.concatenate([x, x]))
    assert lone.make_mask(1) is None and lone.make_mask(2) is not None
    assert two.make_mask(1) is not None


def test_installing_touches_no_other_cache(theirs: None) -> None:
    before = {cls: cls.make_mask for cls in (KVCache, QuantizedBatchKVCache)}
    masks.install()
    assert {cls: cls.make_mask for cls in before} == before
