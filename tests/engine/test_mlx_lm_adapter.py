"""The contract ``tinytitan.engine.mlx_lm_adapter`` holds mlx-lm to: every attribute and behaviour it
relies on, driven through a real ``BatchGenerator`` on the tiny model.

Run this before lifting the upper bound on ``mlx-lm`` in ``pyproject.toml``: a release that renames
one of these attributes fails here (and, at start-up, ``problems`` turns off what depends on it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tinytitan.engine.mlx_lm_adapter import (
    DecodingRows,
    cache_problems,
    decoder_layers,
    infer_tool_parser,
    model_classes,
    problems,
    route_batch_mask,
    route_quantized_attention,
    set_prefill_step,
)
from tinytitan.testing.device import EXACT

PROMPT = list(range(100, 121))  # 21 tokens
EOS = 151645


@pytest.fixture(scope="module")
def model(tiny_dir: Any) -> Any:
    from tinytitan.engine.device import thread as device_thread
    from tinytitan.engine.device.placement import device_context

    with device_thread.claimed(beside_workers=True), device_context(EXACT):
        from mlx_lm import load

        loaded, _tok = load(str(tiny_dir))
    return loaded


@pytest.fixture
def gen(model: Any, device: None) -> Iterator[Any]:
    from mlx_lm.generate import BatchGenerator

    from tinytitan.engine.device.placement import device_context

    with device_context(EXACT):
        generator = BatchGenerator(model, completion_batch_size=4, prefill_batch_size=1, prefill_step_size=2048)
        yield generator
        generator.close()


def insert(gen: Any, prompt: list[int], max_tokens: int = 16, **kw: Any) -> int:
    from mlx_lm.generate import StopSequences

    from tinytitan.engine.device.sampling import make_sampler
    from tinytitan.engine.request import Sampling

    (uid,) = gen.insert(
        [prompt],
        max_tokens=[max_tokens],
        samplers=[make_sampler(Sampling(temperature=0.0))],
        stop_sequences=[StopSequences([[EOS]])],
        **kw,
    )
    return int(uid)


def decode_until_rows(gen: Any) -> DecodingRows:
    """Plain steps until the prompt is in and a row decodes."""
    for _ in range(64):
        rows = DecodingRows.of(gen)
        if rows is not None:
            return rows
        gen.next()
    raise AssertionError("no row ever decoded")


def test_a_fresh_generator_has_everything(gen: Any) -> None:
    assert problems(gen) == {}


def test_the_prefill_step_is_read_at_every_step(gen: Any) -> None:
    insert(gen, PROMPT)
    set_prefill_step(gen, 8)
    prompts, _ = gen.next()
    assert [p.progress for p in prompts] == [(8, len(PROMPT))]
    set_prefill_step(gen, 4)
    prompts, _ = gen.next()
    assert [p.progress for p in prompts] == [(12, len(PROMPT))]


def test_rows_are_there_only_once_nothing_waits_to_prefill(gen: Any) -> None:
    insert(gen, PROMPT)
    assert DecodingRows.of(gen) is None  # queued
    set_prefill_step(gen, 8)
    gen.next()
    assert DecodingRows.of(gen) is None  # prefilling
    rows = decode_until_rows(gen)
    assert len(rows.uids) == 1
    insert(gen, PROMPT[:5])
    assert DecodingRows.of(gen) is None  # a newcomer waits


def test_the_pending_token_is_what_the_next_plain_step_emits(gen: Any) -> None:
    uid = insert(gen, PROMPT, max_tokens=10)
    rows = decode_until_rows(gen)
    room = rows.room(0)
    for _ in range(3):
        (pending,) = rows.pending()
        _, responses = gen.next()
        assert [(r.uid, int(r.token)) for r in responses] == [(uid, pending)]
        assert rows.tokens[0][-1] == pending  # appended once emitted: what the KV cache holds
        room -= 1
        assert rows.room(0) == room  # counted against max_tokens


def test_set_pending_replaces_the_next_token(gen: Any) -> None:
    import mlx.core as mx

    uid = insert(gen, PROMPT)
    rows = decode_until_rows(gen)
    logprobs = rows.pending_logprobs(0)
    rows.set_pending(mx.array([777], dtype=mx.uint32), [logprobs])
    assert rows.pending() == [777]
    _, responses = gen.next()
    assert [(r.uid, int(r.token)) for r in responses] == [(uid, 777)]


def test_the_token_context_is_what_logits_processors_see(gen: Any) -> None:
    import mlx.core as mx

    seen: list[list[int]] = []

    def watch(tokens: Any, logits: Any) -> Any:
        seen.append(tokens.tolist())
        return logits

    insert(gen, PROMPT, logits_processors=[[watch]])
    rows = decode_until_rows(gen)
    (pending,) = rows.pending()
    gen.next()  # plain decoding shows the processors the prompt, then each token emitted
    assert seen[-1] == [*PROMPT, pending]
    context = rows.context(0, mx.array([5, 6], dtype=mx.int32))
    assert context.tolist() == [*PROMPT, pending, 5, 6]


def test_emit_counts_stops_and_ends_rows_as_plain_decoding_does(gen: Any) -> None:
    from mlx_lm.generate import GenerationBatch

    uid = insert(gen, PROMPT, max_tokens=3)
    rows = decode_until_rows(gen)
    logprobs = rows.pending_logprobs(0)
    response = rows.emit(0, 42, logprobs)
    assert isinstance(response, GenerationBatch.Response)
    assert (response.uid, response.token, response.finish_reason, response.prompt_cache) == (uid, 42, None, None)
    assert rows.tokens[0][-1] == 42 and rows.room(0) == 1  # 3 allowed: 42, and one after the pending one
    stopped = rows.emit(0, EOS, logprobs)
    assert stopped.finish_reason == "stop"
    assert stopped.all_tokens == rows.tokens[0] and stopped.all_tokens[-2:] == [42, EOS]
    assert len(stopped.prompt_cache) == len(decoder_layers(rows.model))
    rows.keep([])
    assert DecodingRows.of(gen) is None


def test_emit_ends_a_row_at_its_cap(gen: Any) -> None:
    insert(gen, PROMPT, max_tokens=2)
    rows = decode_until_rows(gen)
    assert rows.emit(0, 42, rows.pending_logprobs(0)).finish_reason is None
    assert rows.emit(0, 43, rows.pending_logprobs(0)).finish_reason == "length"


def test_keep_filters_rows(gen: Any) -> None:
    first, second = insert(gen, PROMPT), insert(gen, PROMPT[:7])
    for _ in range(64):
        rows = DecodingRows.of(gen)
        if rows is not None and len(rows.uids) == 2:
            break
        gen.next()
    else:
        raise AssertionError("the two rows never decoded together")
    rows.keep([1])
    assert rows.uids == [second] and first not in DecodingRows.of(gen).uids  # type: ignore[union-attr]


def test_the_decoder_layers_are_called_in_order_with_the_hidden_state_first(model: Any, device: None) -> None:
    import mlx.core as mx

    from tinytitan.engine.device.placement import device_context

    layers = decoder_layers(model)
    assert layers and layers == list(model.layers)
    calls: list[tuple[int, ...]] = []
    originals = {type(layer) for layer in layers}
    for cls in originals:

        def watched(self: Any, *args: Any, _call: Any = cls.__call__, **kwargs: Any) -> Any:
            calls.append(tuple(args[0].shape))
            return _call(self, *args, **kwargs)

        sub = type(cls.__name__, (cls,), {"__call__": watched})
        for layer in layers:
            if type(layer) is cls:
                layer.__class__ = sub
    try:
        with device_context(EXACT):
            mx.eval(model(mx.array([PROMPT[:5]])))
    finally:
        for layer in layers:
            layer.__class__ = type(layer).__mro__[1]
    hidden = model.args.hidden_size
    assert calls == [(1, 5, hidden)] * len(layers)


def test_a_model_without_layers_has_none() -> None:
    assert decoder_layers(SimpleNamespace()) == []


@pytest.mark.parametrize(
    ("template", "syntax"),
    [
        ("{{ '<tool_call>\\n<function=' }}", "qwen3_coder"),
        ("{{ '[TOOL_CALLS]' }}", "mistral"),
        ("{{ messages }}", None),
    ],
)
def test_the_tool_parser_a_template_implies(template: str, syntax: str | None) -> None:
    assert infer_tool_parser(template) == syntax


def test_model_classes_public_road_matches_the_private_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import mlx_lm.utils
    from mlx_lm.models import llama, qwen3

    assert model_classes({"model_type": "qwen3"}) == (qwen3.Model, qwen3.ModelArgs)
    monkeypatch.delattr(mlx_lm.utils, "_get_classes")
    assert model_classes({"model_type": "qwen3"}) == (qwen3.Model, qwen3.ModelArgs)
    assert model_classes({"model_type": "mistral"}) == (llama.Model, llama.ModelArgs)  # MODEL_REMAPPING
    with pytest.raises(ValueError, match="not supported"):
        model_classes({"model_type": "no-such-family"})


# -- a renamed attribute: found at start-up, and what needs it is off --------------------------------
def test_a_renamed_attribute_is_named(gen: Any) -> None:
    del gen._generation_batch._num_tokens
    assert problems(gen) == {"drafts": ["GenerationBatch._num_tokens"]}


def test_a_renamed_attribute_turns_drafts_off_with_one_line(
    model: Any, device: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib

    from tinytitan.engine.device import mlx_batch
    from tinytitan.engine.prompt_cache.memory import PromptCache

    generate = importlib.import_module("mlx_lm.generate")  # `mlx_lm.generate` is also a function's name
    original = generate.BatchGenerator

    def renamed(*args: Any, **kwargs: Any) -> Any:
        """A generator whose generation batch calls ``_num_tokens`` something else (a release that renamed it)."""
        made = original(*args, **kwargs)
        made._generation_batch._n_generated = made._generation_batch.__dict__.pop("_num_tokens")
        return made

    monkeypatch.setattr(generate, "BatchGenerator", renamed)
    monkeypatch.setattr(mlx_batch, "_said", set())
    caplog.set_level(logging.WARNING, logger="tinytitan.mlx")
    batches = [mlx_batch.MlxBatch(model, PromptCache(2), "m", [EOS], 1, drafts=True, device=EXACT) for _ in range(2)]
    try:
        assert [b.speculator for b in batches] == [None, None]
        lines = [r.getMessage() for r in caplog.records if "lacks" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "GenerationBatch._num_tokens" in lines[0] and "serving without drafts" in lines[0]
    finally:
        for batch in batches:
            batch.close()


# -- the cache contract the generator drives (a quantized KV cache, issue 42) -------------------------
@pytest.fixture(scope="module")
def kv_model(tiny_kv_dir: Any) -> Any:
    from tinytitan.engine.device import thread as device_thread
    from tinytitan.engine.device.placement import device_context

    with device_thread.claimed(beside_workers=True), device_context(EXACT):
        from mlx_lm import load

        loaded, _tok = load(str(tiny_kv_dir))
    return loaded


def test_our_quantized_batch_cache_has_what_this_mlx_lm_drives() -> None:
    from tinytitan.engine.kv.cache import QuantizedBatchKVCache

    assert cache_problems(QuantizedBatchKVCache) == []


def test_a_cache_method_mlx_lm_gained_or_one_we_lack_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlx_lm.models.cache import BatchKVCache

    from tinytitan.engine.kv.cache import QuantizedBatchKVCache

    monkeypatch.setattr(BatchKVCache, "rotate", lambda self: None, raising=False)  # a release that added one
    assert cache_problems(QuantizedBatchKVCache) == ["BatchKVCache.rotate (new)"]
    partial = type("Partial", (), {n: getattr(QuantizedBatchKVCache, n) for n in ("prepare", "finalize", "trim")})
    assert "Partial.extend" in cache_problems(partial) and "Partial.trim" not in cache_problems(partial)
    monkeypatch.delattr(BatchKVCache, "rotate")
    monkeypatch.delattr(BatchKVCache, "finalize")  # a release that renamed one it drives
    assert cache_problems(QuantizedBatchKVCache) == ["BatchKVCache.finalize"]


def test_the_generator_batches_row_caches_through_their_merge_and_attends_quantized(
    kv_model: Any, device: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlx-lm merges a prompt's row caches with the first one's ``merge``, extends, filters and extracts
    the batch cache, and its attention takes the quantized path when the cache has ``bits``."""
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.models import base

    from tinytitan.engine.device.placement import device_context
    from tinytitan.engine.kv.cache import QuantizedBatchKVCache, QuantizedRow, row_caches
    from tinytitan.engine.kv.form import KvForm

    quantized_calls: list[int] = []
    original = base.quantized_scaled_dot_product_attention

    def counted(*args: Any, **kwargs: Any) -> Any:
        quantized_calls.append(kwargs["bits"])
        return original(*args, **kwargs)

    monkeypatch.setattr(base, "quantized_scaled_dot_product_attention", counted)
    form = KvForm(4, 64)
    with device_context(EXACT):
        gen = BatchGenerator(kv_model, completion_batch_size=4, prefill_batch_size=1, prefill_step_size=2048)
        try:
            first = insert(gen, PROMPT, caches=[row_caches(kv_model, form)])
            insert(gen, PROMPT[:9], caches=[row_caches(kv_model, form)])
            for _ in range(64):
                rows = DecodingRows.of(gen)
                if rows is not None and len(rows.uids) == 2:
                    break
                gen.next()
            else:
                raise AssertionError("the two rows never decoded together")
            assert all(isinstance(c, QuantizedBatchKVCache) and c.quantized for c in rows.cache)
            before = len(quantized_calls)
            gen.next()
            assert quantized_calls[before:] == [4] * len(decoder_layers(kv_model))  # every layer, 4 bits
            caches = gen.remove([first], return_prompt_caches=True)
            kept, tokens = caches[first]
            assert all(isinstance(c, QuantizedRow) for c in kept) and kept[0].offset == len(tokens)
        finally:
            gen.close()


def test_a_routed_quantized_attention_is_what_mlx_lms_attention_calls_for_a_cache_with_bits(
    device: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``models/mlx/cpu_kv_attention.py`` puts its split where mlx-lm's attention looks its quantized one up."""
    import mlx.core as mx
    from mlx_lm.models import base

    monkeypatch.setattr(base, "quantized_scaled_dot_product_attention", base.quantized_scaled_dot_product_attention)
    seen: list[dict[str, Any]] = []

    def route(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(*args, **kwargs)

    original = route_quantized_attention(route)
    q = mx.ones((1, 2, 1, 64))
    k = tuple(mx.quantize(mx.ones((1, 1, 5, 64)), group_size=64, bits=8))
    out = base.scaled_dot_product_attention(q, k, k, SimpleNamespace(bits=8, group_size=64), scale=1.0, mask=None)
    assert out.shape == (1, 2, 1, 64) and mx.allclose(out, mx.ones_like(out)).item()
    assert seen == [{"scale": 1.0, "mask": None, "group_size": 64, "bits": 8}]


def test_a_routed_batch_mask_is_what_the_model_asks_a_batch_cache_for_each_pass(model: Any, device: None) -> None:
    """``kv/masks.py`` puts a lone row's maskless step where mlx-lm's models ask a ``BatchKVCache`` for a mask:
    once per forward pass, with the pass's token count, before the cache holds the new tokens."""
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache

    from tinytitan.engine.device.placement import device_context

    calls: list[tuple[int, int, bool, Any]] = []

    def route(cache: Any, n: int, return_array: bool = False, **kwargs: Any) -> Any:
        calls.append((n, cache._idx, return_array, kwargs.get("window_size")))
        return original(cache, n, return_array=return_array, **kwargs)

    original = route_batch_mask(route)
    try:
        with device_context(EXACT):
            cache = [BatchKVCache([0]) for _ in model.layers]
            model(mx.array([PROMPT]), cache=cache)
            model(mx.array([[5]]), cache=cache)
    finally:
        assert route_batch_mask(original) is route
    assert calls == [(21, 0, False, None), (1, 21, False, None)]


def test_a_changed_cache_contract_keeps_the_kv_cache_in_full_precision_with_one_line(
    kv_model: Any, device: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mlx_lm.models.cache import BatchKVCache

    from tinytitan.engine.device import mlx_batch
    from tinytitan.engine.kv.form import KvForm
    from tinytitan.engine.prompt_cache.memory import PromptCache

    monkeypatch.setattr(BatchKVCache, "rotate", lambda self: None, raising=False)
    monkeypatch.setattr(mlx_batch, "_said", set())
    caplog.set_level(logging.WARNING, logger="tinytitan.mlx")
    batches = [
        mlx_batch.MlxBatch(kv_model, PromptCache(2), "m", [EOS], 1, device=EXACT, kv=KvForm(4)) for _ in range(2)
    ]
    try:
        assert [b.kv for b in batches] == [None, None]
        lines = [r.getMessage() for r in caplog.records if "lacks" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "BatchKVCache.rotate (new)" in lines[0] and "the KV cache is kept in full precision" in lines[0]
    finally:
        for batch in batches:
            batch.close()
