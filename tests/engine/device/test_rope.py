"""Qwen2.5-VL (M-RoPE) through the engine on the tiny model (issue 41): each row's 3-D positions
ride on its batch cache (``device/rope.py``), so rows with and without pictures share one batch and
the prompt cache, and each answers as it does alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.engine.device.images import VIRTUAL_BASE, ImageModel
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.service import Engine
from tinytitan.testing.device import EXACT
from tinytitan.testing.images import checked_picture

from .test_images import ask, backend_of, complete, tokens

RED, BLUE = checked_picture((200, 10, 10), (100, 50)), checked_picture((10, 10, 200), (40, 90))


@pytest.fixture(scope="module")
def engine(tiny_qwen_vl_dir: Path) -> Iterator[Engine]:
    backend = MlxBackend(str(tiny_qwen_vl_dir), max_concurrent=4, device=EXACT)
    engine = Engine(backend)
    yield engine
    engine.shutdown()


def test_a_text_row_and_qwen_image_rows_in_one_batch_give_what_each_gives_alone(engine: Engine) -> None:
    assert engine.info.vision
    requests = [
        ask(engine, "Count from one to twenty in words: one, two, three,", max_tokens=24),
        ask(engine, "Compare ", RED, " with ", BLUE, " in one word.", max_tokens=24),
        ask(engine, BLUE, "What is this?", max_tokens=24),
    ]
    assert sum(t >= VIRTUAL_BASE for t in tokens(engine, requests[1])) > 8  # both pictures' image tokens
    backend = backend_of(engine)
    alone = []
    for request in requests:
        backend.prompt_cache.clear(backend.identity)  # each row prefills its whole prompt
        alone += complete(engine, request)
    backend.prompt_cache.clear(backend.identity)
    assert isinstance(backend.model, ImageModel) and backend.model.mrope and backend.batch is not None
    backend.batch.peak_rows = 0
    together = complete(engine, *requests)
    assert backend.batch.peak_rows == 3
    assert [c.text for c in together] == [c.text for c in alone]
    assert len({c.text for c in alone}) == 3


def test_the_same_qwen_picture_twice_hits_the_prompt_cache_and_answers_as_cold(engine: Engine) -> None:
    backend = backend_of(engine)
    backend.prompt_cache.clear(backend.identity)
    first = ask(engine, RED, "Describe this screenshot in one line, please.", max_tokens=16)
    prompt = tokens(engine, first)
    (cold,) = complete(engine, first)
    (warm,) = complete(engine, first)
    assert warm.finished.usage.cached_tokens >= len(prompt) - 1  # the whole prompt, picture included
    assert warm.text == cold.text
    # a later turn adds a picture after the cached one: its positions are made again, not shifted
    later = ask(engine, RED, "Describe this screenshot in one line, please.", BLUE, "And this one?", max_tokens=16)
    (hit,) = complete(engine, later)
    assert hit.finished.usage.cached_tokens > 0
    backend.prompt_cache.clear(backend.identity)
    (fresh,) = complete(engine, later)
    assert fresh.finished.usage.cached_tokens == 0 and hit.text == fresh.text


def test_each_rows_rope_follows_it_through_merge_extend_filter_and_extract(device: None) -> None:
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    from tinytitan.engine.device import rope

    def row(n: int, r: rope.Rope) -> rope.RopeRow:
        cache = KVCache()
        kv = mx.ones((1, 2, n, 4))
        cache.update_and_fetch(kv, kv)
        (tagged,) = rope.tagged([cache], r)
        return tagged

    a, b, c = rope.Rope(None, 3), rope.Rope(None, -2), rope.PLAIN
    batch = rope.RopeRow.merge([row(5, a)])
    assert isinstance(batch, rope.RopeBatch) and batch.ropes == [a]
    batch.extend(rope.RopeRow.merge([row(2, b)]))
    batch.extend(rope.RopeRow.merge([row(4, c)]))
    assert batch.ropes == [a, b, c]
    assert rope.positions(batch.ropes, batch.offset, 2).tolist() == [[[8, 9], [0, 1], [4, 5]]] * 3
    batch.filter([0, 2])
    assert batch.ropes == [a, c]
    extracted = batch.extract(1)
    assert type(extracted) is KVCache and extracted.offset == 4  # the prompt cache stores no positions
    table = mx.array([[0, 1, 2, 2], [0, 1, 2, 3], [0, 1, 2, 3]])
    one = rope.RopeRow.merge([row(2, rope.Rope(table, -1))])  # a prompt chunk from index 2, past its table at 4
    assert rope.positions(one.ropes, one.offset, 3).tolist() == [[[2, 2, 3]], [[2, 3, 3]], [[2, 3, 3]]]
