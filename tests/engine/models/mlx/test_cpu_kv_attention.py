"""A quantized KV cache's decode attention split among the cores: mlx-lm's numbers, taken only where it applies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

mx = pytest.importorskip("mlx.core")

from mlx_lm.models import base  # noqa: E402
from mlx_lm.models.base import create_causal_mask  # noqa: E402

from tinytitan import cpu_share  # noqa: E402
from tinytitan.engine.models.mlx import cpu_kv_attention  # noqa: E402


@pytest.fixture(autouse=True)
def on_the_cpu(device: None) -> Iterator[None]:
    """The test's thread is the device thread (``device``), computing on the CPU."""
    with mx.stream(mx.cpu):
        yield


def _inputs(batch: int, q_heads: int, kv_heads: int, queries: int, keys: int, bits: int) -> tuple[Any, ...]:
    key = mx.random.key(7)
    k1, k2, k3 = mx.random.split(key, 3)
    q = mx.random.normal((batch, q_heads, queries, 64), key=k1)
    # the keys sit in a cache's room: a slice of a longer buffer, as the batch cache hands them out
    k = mx.quantize(mx.random.normal((batch, kv_heads, keys + 40, 64), key=k2), group_size=32, bits=bits)
    v = mx.quantize(mx.random.normal((batch, kv_heads, keys + 40, 64), key=k3), group_size=32, bits=bits)
    return q, tuple(x[..., :keys, :] for x in k), tuple(x[..., :keys, :] for x in v)


def _masks(batch: int, heads: int, queries: int, keys: int) -> dict[str, Any]:
    return {
        "none": None,
        "left padding": create_causal_mask(queries, keys - queries, left_padding=mx.array([3] * batch)),
        "boolean": mx.random.uniform(shape=(batch, 1, queries, keys), key=mx.random.key(2)) > 0.3,
    }


@pytest.mark.parametrize("mask_name", ["none", "left padding", "boolean"])
@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("shape", [(1, 16, 8, 1, 300), (3, 6, 3, 4, 129), (2, 4, 4, 1, 70)], ids=str)
@pytest.mark.parametrize("bits", [8, 4])
def test_the_split_gives_mlx_lms_numbers(shape: tuple[int, ...], parts: int, mask_name: str, bits: int) -> None:
    batch, q_heads, kv_heads, queries, keys = shape
    q, k, v = _inputs(batch, q_heads, kv_heads, queries, keys, bits=bits)
    mask = _masks(batch, q_heads, queries, keys)[mask_name]
    want = cpu_kv_attention.whole_attention()(mx.array(q), k, v, scale=0.125, mask=mask, group_size=32, bits=bits)
    got = cpu_kv_attention.split_attention(q, k, v, 0.125, mask, 32, bits, parts=min(parts, kv_heads))
    assert got.shape == want.shape
    assert mx.allclose(got, want, atol=1e-5, rtol=1e-5).item()


def test_the_route_splits_only_a_device_threads_decode_step_with_cores_to_spare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cpu_kv_attention.install()
    assert base.quantized_scaled_dot_product_attention is not cpu_kv_attention.whole_attention()  # routed
    splits: list[int] = []
    real_split = cpu_kv_attention.split_attention

    def counted(*args: Any, parts: int, **kwargs: Any) -> Any:
        splits.append(parts)
        return real_split(*args, parts=parts, **kwargs)

    monkeypatch.setattr(cpu_kv_attention, "split_attention", counted)
    monkeypatch.setattr(cpu_kv_attention, "usable_cores", lambda: 2)  # on any machine, however busy
    monkeypatch.setattr(cpu_share, "threads", lambda most: most)

    def attend(queries: int = 1) -> Any:
        q, k, v = _inputs(1, 8, 4, queries, 100, bits=8)
        return base.quantized_scaled_dot_product_attention(q, k, v, scale=0.1, mask=None, group_size=32, bits=8)

    attend()
    assert splits == [2]
    attend(queries=cpu_kv_attention.MOST_QUERIES + 1)  # a prefill chunk's length: whole
    q, k, v = _inputs(1, 8, 4, 1, 100, bits=8)
    base.quantized_scaled_dot_product_attention(
        q.astype(mx.float16), k, v, scale=0.1, mask=None, group_size=32, bits=8
    )  # not float32: whole
    monkeypatch.setattr(cpu_share, "threads", lambda most: 1)  # a busy machine leaves one core
    attend()
    monkeypatch.setattr(cpu_share, "threads", lambda most: most)
    monkeypatch.setattr(cpu_kv_attention, "is_device_thread", lambda: False)  # another thread: whole
    attend()
    assert splits == [2]


def test_a_later_device_thread_splits_on_streams_of_its_own() -> None:
    """mlx's streams belong to the thread that made them; a model loaded again runs on a new worker."""
    import threading

    from tinytitan.engine.device import thread as device_thread

    q, k, v = _inputs(1, 8, 4, 1, 100, bits=8)
    want = cpu_kv_attention.split_attention(q, k, v, 0.1, None, 32, 8, parts=2)  # this thread's streams
    mx.eval(want)
    got: list[Any] = []

    def worker() -> None:
        with device_thread.claimed(beside_workers=True), mx.stream(mx.cpu):
            out = cpu_kv_attention.split_attention(q, k, v, 0.1, None, 32, 8, parts=2)
            mx.eval(out)
            got.append(out)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(got) == 1 and mx.array_equal(got[0], want).item()
