"""Speculative decoding (prompt-lookup drafts): greedy output identical to plain decoding.

Drives ``MlxBatch`` directly on the tiny real model, on this test's device thread.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tinytitan.engine.device.batch import Output, Row
from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import Sampling

# a prompt that repeats itself: the drafts find matches in it (and in what the model then repeats)
LOOPED = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4 + [11, 12, 13]


@pytest.fixture(scope="module")
def model(tiny_dir: Any) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed():
        from mlx_lm import load

        loaded, _tok = load(str(tiny_dir))
    return loaded


def make_batch(model: Any, *, drafts: bool, eos: list[int] | None = None) -> MlxBatch:
    from tinytitan.engine.prompt_cache.memory import PromptCache

    return MlxBatch(model, PromptCache(4), "m", eos or [], 1, drafts=drafts)


def generate(batch: MlxBatch, prompt: list[int], n: int, **sampling: Any) -> tuple[list[int], str | None, int]:
    """The row's tokens, its finish reason and the largest count of outputs one step gave it."""
    request = SimpleNamespace(sampling=Sampling(temperature=0.0, **sampling))
    row = Row("m", request, Prompt("", len(prompt), prompt), n, lambda _o: None, None)  # type: ignore[arg-type]
    batch.add(row)
    tokens: list[int] = []
    widest = 0
    while True:
        outs: list[Output] = [o for o in batch.step() if o.row is row]
        widest = max(widest, len(outs))
        for out in outs:
            tokens += out.tokens
            if out.finish is not None:
                return tokens, out.finish, widest


def plain_and_drafted(model: Any, prompt: list[int], n: int, **kw: Any) -> tuple[Any, Any, MlxBatch]:
    plain = make_batch(model, drafts=False, eos=kw.pop("eos", None))
    drafted = make_batch(model, drafts=True, eos=list(plain.eos))
    try:
        return generate(plain, prompt, n, **kw), generate(drafted, prompt, n, **kw), drafted
    finally:
        plain.close()
        drafted.close()


def test_greedy_output_is_identical_with_drafts(model: Any, device: None) -> None:
    (a, fa, _), (b, fb, widest), batch = plain_and_drafted(model, LOOPED, 40)
    assert b == a and fb == fa == "length" and len(b) == 40  # the cap exactly hit, never passed
    assert batch.speculator is not None and batch.speculator.proposed > 0
    if batch.speculator.accepted:
        assert widest > 1  # some step emitted several tokens


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9, 17])
def test_the_cap_is_hit_exactly(model: Any, device: None, n: int) -> None:
    (a, fa, _), (b, fb, _), _ = plain_and_drafted(model, LOOPED, n)
    assert b == a and len(b) == n and fa == fb == "length"


def test_penalties_apply_per_position(model: Any, device: None) -> None:
    for kw in ({"repetition_penalty": 1.3}, {"presence_penalty": 0.7}):
        (a, _, _), (b, _, _), _ = plain_and_drafted(model, LOOPED, 30, **kw)
        assert b == a, kw


def test_an_end_token_inside_a_drafted_step_ends_the_row_there(model: Any, device: None) -> None:
    (a, _, _), _, _ = plain_and_drafted(model, LOOPED, 30)
    end = a[len(a) // 2]  # a token the model emits: made the end token, generation stops at it
    (p, fp, _), (d, fd, _), _ = plain_and_drafted(model, LOOPED, 30, eos=[end])
    assert d == p and fd == fp == "stop"


def test_the_kv_cache_holds_exactly_the_emitted_tokens(model: Any, device: None) -> None:
    """A row's KV state at its end (stored in the prompt cache) covers exactly prompt + output, and
    its values are those of plain decoding (rejected drafts trimmed, not left behind)."""
    import mlx.core as mx

    kept: dict[bool, tuple[int, list[int], Any]] = {}
    for drafts in (False, True):
        batch = make_batch(model, drafts=drafts)
        stored: list[tuple[int, list[int], Any]] = []

        def remember(cache: Any, toks: Any, into: list[tuple[int, list[int], Any]] = stored) -> None:
            into.append((int(cache[0].offset), list(toks), mx.array(cache[0].state[0])))

        batch._remember = remember  # type: ignore[method-assign,assignment]
        try:
            tokens, _, _ = generate(batch, LOOPED, 25)
        finally:
            batch.close()
        assert stored and stored[0][0] == len(LOOPED) + len(tokens) and stored[0][1] == [*LOOPED, *tokens]
        kept[drafts] = stored[0]
    plain, drafted = kept[False][2], kept[True][2]
    n = kept[False][0]
    assert mx.allclose(plain[..., -n:, :], drafted[..., -n:, :], atol=1e-4).item()
