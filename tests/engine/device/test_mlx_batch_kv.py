"""A quantized KV cache that keeps batching (``--kv-bits``, issue 42): ``MlxBatch`` driven directly on the
tiny model with heads of 64 (``tiny-kv``), on this test's device thread.

Rows decoded together — with drafts or without — give exactly the tokens each gives alone under the
same quantized cache; a row cancelled mid-prefill leaves a whole prefix behind; a prompt-cache hit
and a disk-tier hit after a restart give the tokens a cold start gives, the disk holding the
quantized form in smaller files. Every test runs under both attentions (the ``attention`` fixture): a
quantized cache's prefill chunk attends over dequantized keys through
``mx.fast.scaled_dot_product_attention``, which the NumPy CPU attention takes over once a float32 CPU
model is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.device.placement import device_context
from tinytitan.engine.kv.cache import QuantizedRow, dequantized
from tinytitan.engine.kv.form import KvForm
from tinytitan.engine.prompt_cache.disk import DiskTier
from tinytitan.engine.prompt_cache.memory import PromptCache
from tinytitan.engine.request import Sampling
from tinytitan.testing.batches import collect, row
from tinytitan.testing.device import EXACT

LOOPED = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4 + [11, 12, 13]  # the drafts find matches in it
PROMPTS = [LOOPED, LOOPED[5:], [7, 8, 9] * 6]
CAPS = [12, 20, 36]
LONG = list(range(1000, 1700))  # 700 tokens: two lone chunks of the tiny model (512 each)


@pytest.fixture(scope="module")
def model(tiny_kv_dir: Path, attention: str) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True), device_context(EXACT):
        from mlx_lm import load

        loaded, _tok = load(str(tiny_kv_dir))
    return loaded


def batch(model: Any, kv: KvForm | None, rows: int = 1, cache: PromptCache | None = None, **kw: Any) -> MlxBatch:
    return MlxBatch(model, PromptCache(0) if cache is None else cache, "m", [], rows, device=EXACT, kv=kv, **kw)


def run(model: Any, kv: KvForm | None, prompts: list[list[int]], caps: list[int], **kw: Any) -> list[list[Any]]:
    b = batch(model, kv, len(prompts), **kw)
    try:
        return collect(b, [row(p, n) for p, n in zip(prompts, caps, strict=True)])
    finally:
        b.close()


def held(cache: PromptCache, prompts: list[list[int]]) -> list[list[Any]]:
    """The keys and values each prompt's snapshot holds, dequantized, layer by layer."""

    out = []
    for prompt in prompts:
        (tokens,) = [t for t in cache.snapshots("m") if list(t[: len(prompt)]) == prompt]
        snapshot, reused = cache.fetch([*tokens, 0], "m")
        assert reused == len(tokens) and snapshot is not None
        layers = []
        for c in snapshot:
            keys, values = c.keys_and_values()
            layers += [dequantized(x, c.form) for x in (keys, values)]
        out.append(layers)
    return out


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("drafts", [False, True])
def test_rows_together_give_what_each_gives_alone(model: Any, device: None, bits: int, drafts: bool) -> None:
    import mlx.core as mx

    kv = KvForm(bits, 64)
    alone_cache = PromptCache(8)
    alone = [run(model, kv, [p], [n], cache=alone_cache)[0] for p, n in zip(PROMPTS, CAPS, strict=True)]
    together_cache = PromptCache(8)
    b = batch(model, kv, len(PROMPTS), cache=together_cache, drafts=drafts)
    try:
        together = collect(b, [row(p, n) for p, n in zip(PROMPTS, CAPS, strict=True)])
        if drafts:
            assert b.speculator is not None and b.speculator.proposed > 0  # drafts rewound the quantized cache
        else:
            assert b.peak_rows == 3  # they shared the steps
    finally:
        b.close()
    assert together == alone and [len(t) for t in together] == CAPS
    # and each row's cache holds what it holds alone (the tiny model's tokens alone are a weak witness)
    for mine, its in zip(held(together_cache, PROMPTS), held(alone_cache, PROMPTS), strict=True):
        assert all(mx.allclose(a, b, atol=1e-5).item() for a, b in zip(mine, its, strict=True))


def test_our_cpu_attention_splits_the_decode_steps(
    model: Any, device: None, attention: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under our CPU attention the test above went through the split (on a machine of 2 cores or more)."""
    from tinytitan import cpu_share
    from tinytitan.engine.models.mlx import cpu_kv_attention

    splits: list[int] = []
    real = cpu_kv_attention.split_attention

    def counted(*args: Any, parts: int, **kwargs: Any) -> Any:
        splits.append(parts)
        return real(*args, parts=parts, **kwargs)

    monkeypatch.setattr(cpu_kv_attention, "usable_cores", lambda: 2)  # on any machine, however busy
    monkeypatch.setattr(cpu_share, "threads", lambda most: most)
    monkeypatch.setattr(cpu_kv_attention, "split_attention", counted)
    (tokens,) = run(model, KvForm(8, 64), [LOOPED], [4])
    assert len(tokens) == 4
    assert set(splits) == ({2} if attention == "our CPU attention" else set())


def test_seeded_rows_together_give_what_each_gives_alone(model: Any, device: None) -> None:
    kv, sampling = KvForm(4, 64), Sampling(temperature=0.8, seed=7)
    alone = []
    for p, n in zip(PROMPTS, CAPS, strict=True):
        b = batch(model, kv)
        alone += collect(b, [row(p, n, sampling)])
        b.close()
    b = batch(model, kv, 3)
    assert collect(b, [row(p, n, sampling) for p, n in zip(PROMPTS, CAPS, strict=True)]) == alone
    b.close()


def test_the_rows_caches_are_quantized(model: Any, device: None) -> None:
    quantized = PromptCache(4)
    run(model, KvForm(4, 64), [LOOPED], [8], cache=quantized)
    full = PromptCache(4)
    run(model, None, [LOOPED], [8], cache=full)
    snapshot, reused = quantized.fetch([*LOOPED, 1], "m")
    assert reused > 0 and snapshot is not None and all(isinstance(c, QuantizedRow) for c in snapshot)
    assert quantized.nbytes <= 0.3 * full.nbytes


def test_a_prompt_cache_hit_gives_the_tokens_a_cold_start_gives(model: Any, device: None) -> None:
    kv = KvForm(4, 64)
    follow_up = [*LOOPED, 40, 41, 42, 43]
    cold = run(model, kv, [follow_up], [16])
    cache = PromptCache(4)
    run(model, kv, [LOOPED], [6], cache=cache)  # stores the prompt and what it generated
    b = batch(model, kv, cache=cache)
    try:
        r = row(follow_up, 16)
        warm = collect(b, [r])
    finally:
        b.close()
    _snapshot, reused = cache.fetch(follow_up, "m")
    assert reused >= len(LOOPED) and warm == cold


@pytest.mark.parametrize("bits", [4, 8])
def test_a_disk_tier_hit_after_a_restart_gives_the_same_tokens_from_smaller_files(
    model: Any, device: None, tmp_path: Path, bits: int
) -> None:
    kv = KvForm(bits, 64)
    prompt = [*LONG[:520], 5, 6, 7]  # two whole blocks of 256 on disk
    cold = run(model, kv, [prompt], [10])
    sizes = {}
    for form, name in ((kv, "quantized"), (None, "full")):
        written = PromptCache(0, disk=DiskTier(tmp_path / name, 2**30, kv=form))
        run(model, form, [prompt], [2], cache=written)
        assert written.flush(timeout=60)
        sizes[name] = sum(p.stat().st_size for p in (tmp_path / name).iterdir())
    assert sizes["quantized"] <= (0.3 if bits == 4 else 0.6) * sizes["full"]
    restarted = PromptCache(0, disk=DiskTier(tmp_path / "quantized", 2**30, kv=kv))  # a new process: the files
    loaded, reused = restarted.fetch(prompt, "m")
    assert reused == 512 and loaded is not None and all(isinstance(c, QuantizedRow) for c in loaded)
    assert run(model, kv, [prompt], [10], cache=restarted) == cold


def test_a_row_cancelled_mid_prefill_leaves_a_whole_quantized_prefix(model: Any, device: None) -> None:
    kv = KvForm(4, 64)
    fresh = run(model, kv, [LONG], [8])
    cache = PromptCache(4)
    b = batch(model, kv, 2, cache=cache)
    try:
        cancelled = row(LONG, 8)
        b.add(cancelled)
        assert b.step() == []  # the first lone chunk: 512 tokens
        cancelled.cancelled = True  # the client leaves before the second
        assert b.step() == []
        assert b.rows == 0 and b.watch is not None and b.watch.interrupts == 1
        snapshot, reused = cache.fetch(LONG, "m")
        assert reused == 512 and snapshot is not None and all(isinstance(c, QuantizedRow) for c in snapshot)
        assert collect(b, [row(LONG, 8)]) == fresh  # resumed from the rewound quantized state
    finally:
        b.close()


def test_a_cancelled_row_leaves_the_others_as_they_were(model: Any, device: None) -> None:
    kv = KvForm(8, 64)
    alone = [run(model, kv, [p], [n])[0] for p, n in zip(PROMPTS[:2], CAPS[:2], strict=True)]
    b = batch(model, kv, 3)
    try:
        rows = [row(p, n) for p, n in zip(PROMPTS[:2], CAPS[:2], strict=True)]
        victim = row([7, 8, 9] * 6, 200)
        got: dict[int, list[Any]] = {r.id: [] for r in rows}
        for r in [*rows[:1], victim, *rows[1:]]:
            b.add(r)
        for _ in range(6):
            for out in b.step():
                if out.row.id in got:
                    got[out.row.id] += out.tokens
        b.remove(victim)  # the worker drops a cancelled row between steps
        while b.rows:
            for out in b.step():
                got[out.row.id] += out.tokens
    finally:
        b.close()
    assert [got[r.id] for r in rows] == alone
