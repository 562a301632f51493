"""The layer watch (``device/interrupt.py``): a lone prefill chunk left between two layers once its row
is cancelled, on the tiny real model, driven on the test's own thread (the ``device`` fixture)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tinytitan.engine.device.batch import Output, Row
from tinytitan.engine.device.interrupt import LAYER_WORK, Interrupted, LayerWatch, rewind
from tinytitan.engine.device.mlx_batch import PREFILL_ALONE, MlxBatch
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.prompt_cache.memory import PromptCache
from tinytitan.engine.request import Sampling

LONG = list(range(1000, 2500))  # 1,500 tokens: three lone chunks of the tiny model (512 each)


@pytest.fixture(scope="module")
def model(tiny_dir: Path) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True):
        import mlx.core as mx
        from mlx_lm.utils import load_model

        loaded, _config = load_model(tiny_dir, lazy=True)
        mx.eval(loaded.parameters())
        return loaded


def row(tokens: list[int], n: int = 8) -> Row:
    request = SimpleNamespace(sampling=Sampling(temperature=0.0, seed=1))
    return Row("m", request, Prompt("", len(tokens), tokens), n, lambda _o: None, None)  # type: ignore[arg-type]


def run(batch: MlxBatch, r: Row) -> list[Any]:
    """The row's tokens and finish reason, stepping the batch until it ends."""
    got: list[Any] = []
    batch.add(r)
    while True:
        for out in batch.step():
            assert isinstance(out, Output) and out.error is None
            got += out.tokens
            if out.finish is not None:
                return [*got, out.finish]


def make(model: Any, cache: PromptCache | None = None, *, interruptible: bool = True) -> MlxBatch:
    return MlxBatch(model, PromptCache(0) if cache is None else cache, "m", [], 2, interruptible=interruptible)


def test_a_lone_chunk_is_capped_at_one_small_step_of_work_per_layer(model: Any, device: None) -> None:
    layers = len(model.layers)
    assert make(model).prefill_alone == min(PREFILL_ALONE, LAYER_WORK * layers) == 512  # the tiny model: 2 layers
    assert make(model, interruptible=False).prefill_alone == PREFILL_ALONE
    assert LayerWatch(object()).chunk_cap() is None  # nothing to watch: no cap, never armed


def test_the_watch_leaves_greedy_output_and_the_weights_as_they_are(model: Any, device: None) -> None:
    from mlx.utils import tree_flatten

    names = [str(item[0]) for item in tree_flatten(model.parameters())]
    plain = run(make(model, interruptible=False), row(LONG))
    watched = make(model)
    assert run(watched, row(LONG)) == plain  # the same tokens, chunked and evaluated layer by layer
    assert watched.watch is not None and watched.watch.layer_calls >= 2 * len(model.layers)
    assert watched.watch.interrupts == 0
    assert [str(item[0]) for item in tree_flatten(model.parameters())] == names
    assert type(model.layers[0]).__name__ == "TransformerBlock"


def test_an_unarmed_watch_only_passes_the_call_on(model: Any, device: None) -> None:
    import mlx.core as mx

    watch = LayerWatch(model)
    model(mx.array([LONG[:40]]))
    assert watch.layer_calls == 0
    with pytest.raises(Interrupted), watch.armed(lambda: True):
        model(mx.array([LONG[:40]]))
    assert watch.layer_calls == 1 and watch.interrupts == 1  # left before the first layer ran
    model(mx.array([LONG[:40]]))  # disarmed again on the way out
    assert watch.layer_calls == 1
    with watch.armed(lambda: False):
        model(mx.array([LONG[:512]]))  # a full lone chunk: a look before every layer (256 tokens' work each)
        model(mx.array([LONG[:40]]))  # a short one: both layers are less than 256 tokens' work, one look
    assert (watch.layer_calls, watch.looks) == (5, 4)


@pytest.mark.parametrize("leaves", ["between chunks", "in the first layer"])
def test_a_cancelled_chunk_is_left_and_its_kv_state_rewound_to_before_it(
    model: Any, device: None, monkeypatch: pytest.MonkeyPatch, leaves: str
) -> None:
    from mlx_lm.models.qwen3 import TransformerBlock

    fresh = run(make(model, interruptible=False), row(LONG))
    cache = PromptCache(4)
    batch = make(model, cache)
    cancelled = row(LONG)
    batch.add(cancelled)
    assert batch.step() == []  # the first chunk: 512 tokens
    if leaves == "between chunks":
        cancelled.cancelled = True  # the client leaves before the second
    else:  # … while the second's first layer runs: that layer holds the chunk in its KV cache, the next not
        original = TransformerBlock.__call__

        def leaving(self: Any, *args: Any, **kwargs: Any) -> Any:
            cancelled.cancelled = True
            return original(self, *args, **kwargs)

        monkeypatch.setattr(TransformerBlock, "__call__", leaving)
    assert batch.step() == []
    monkeypatch.undo()
    assert batch.rows == 0 and batch.watch is not None and batch.watch.interrupts == 1
    assert batch.steps[-1][:2] == (0, 0)  # nothing of the interrupted chunk kept
    _kv, reused = cache.fetch(LONG, "m")
    assert reused == 512  # what was whole before the chunk: the first chunk, every layer trimmed back
    again = row(LONG)
    assert run(batch, again) == fresh  # resumed from the rewound state, the same greedy tokens


def test_a_prefill_beside_decoding_rows_is_never_interrupted(model: Any, device: None) -> None:
    """An interrupt there would lose the token decoded in the same step: the chunk is small instead."""
    batch = make(model)
    decoding = row([10, 20, 30], n=40)
    batch.add(decoding)
    for _ in range(3):
        batch.step()
    late = row(LONG)
    batch.add(late)
    late.cancelled = True  # the worker removes it before the next step; this one must run whole
    outputs = batch.step()
    assert [o.row for o in outputs] == [decoding] and len(outputs[0].tokens) == 1
    assert batch.watch is not None and batch.watch.interrupts == 0


def test_rewind_trims_every_layer_back_to_before_the_chunk() -> None:
    class Layer:
        def __init__(self, size: int) -> None:
            self.offset = size

        def is_trimmable(self) -> bool:
            return True

        def size(self) -> int:
            return self.offset

        def trim(self, n: int) -> int:
            self.offset -= n
            return n

    layers = [Layer(700), Layer(700), Layer(512)]  # the chunk reached two layers of three
    kept = rewind(layers, list(range(700)), 512)
    assert kept is not None
    assert [layer.offset for layer in kept[0]] == [512, 512, 512] and kept[1] == list(range(512))
    assert rewind([Layer(100)], list(range(700)), 512) is None  # a layer short of it: nothing to keep
    assert rewind(None, None, 0) is None
