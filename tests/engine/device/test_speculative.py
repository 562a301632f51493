"""Speculative decoding (prompt-lookup drafts): greedy output identical to plain decoding.

Drives ``MlxBatch`` directly on the tiny real model, on this test's device thread.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tinytitan.engine.device.batch import Output, Row
from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.device.placement import device_context
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import Sampling
from tinytitan.testing.device import EXACT

# the attention under which seeded draws are compared exactly: the NumPy one takes only multi-token
# passes, and its ~1e-6 differences from mlx's can flip a draw on the random model's flat
# distributions (test_seeded_sampled_output_is_identical_with_drafts measures that with a bar)
SEEDED = "mlx attention"
# a prompt that repeats itself: the drafts find matches in it (and in what the model then repeats)
LOOPED = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4 + [11, 12, 13]


@pytest.fixture(scope="module")
def model(tiny_dir: Any, attention: str) -> Any:
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True), device_context(EXACT):
        from mlx_lm import load

        loaded, _tok = load(str(tiny_dir))
    return loaded


def make_batch(model: Any, *, drafts: bool, eos: list[int] | None = None) -> MlxBatch:
    from tinytitan.engine.prompt_cache.memory import PromptCache

    return MlxBatch(model, PromptCache(4), "m", eos or [], 1, drafts=drafts, device=EXACT)


def generate(batch: MlxBatch, prompt: list[int], n: int, **sampling: Any) -> tuple[list[int], str | None, int]:
    """The row's tokens, its finish reason and the largest count of outputs one step gave it."""
    request = SimpleNamespace(sampling=Sampling(**{"temperature": 0.0, **sampling}))
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


def test_several_rows_at_once_give_what_plain_decoding_gives(model: Any, device: None, attention: str) -> None:
    """Rows in one batch step one token each; the one left alone drafts; every row's tokens are the
    plain ones, greedy and (with mlx's attention, see ``SEEDED``) seeded."""
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import collect, row

    prompts, caps = [LOOPED, LOOPED[5:], [7, 8, 9] * 6], [12, 20, 48]
    seeded = [Sampling(temperature=0.7, seed=5)] if attention == SEEDED else []
    for sampling in (Sampling(temperature=0.0), *seeded):
        got = []
        for drafts in (False, True):
            batch = MlxBatch(model, PromptCache(4), "m", [], 3, drafts=drafts, device=EXACT)
            try:
                got.append(collect(batch, [row(p, n, sampling) for p, n in zip(prompts, caps, strict=True)]))
                if drafts and not sampling.temperature:  # (the random model's draws rarely repeat)
                    assert batch.speculator is not None and batch.speculator.proposed > 0
                if not drafts:  # (a drafted step hands one row several outputs: peak_rows counts those)
                    assert batch.peak_rows == 3  # the three shared steps
            finally:
                batch.close()
        assert got[1] == got[0] and [len(t) for t in got[0]] == caps


def together(model: Any, prompts: list[list[int]], caps: list[int], drafts: bool, **kw: Any) -> tuple[Any, MlxBatch]:
    from tinytitan.engine.prompt_cache.memory import PromptCache
    from tinytitan.testing.batches import collect, row

    eos = kw.pop("eos", [])
    batch = MlxBatch(model, PromptCache(4), "m", eos, len(prompts), drafts=drafts, device=EXACT)
    try:
        sampling = Sampling(**{"temperature": 0.0, **kw})
        return collect(batch, [row(p, n, sampling) for p, n in zip(prompts, caps, strict=True)]), batch
    finally:
        batch.close()


def test_rows_that_all_draft_are_verified_together(model: Any, device: None, attention: str) -> None:
    """Two rows whose lookups both guess draft in one pass; each keeps what both accepted. The
    tokens are plain decoding's, a cap or an end token inside a step ends its row there (the other
    goes on), and seeded rows draw as without drafts."""
    prompts = [LOOPED, [*LOOPED[3:], 11, 12, 13]]
    for caps in ([13, 30], [30, 7], [1, 2]):
        plain, alone = together(model, prompts, caps, False)
        drafted, batch = together(model, prompts, caps, True)
        assert drafted == plain and [len(t) for t in drafted] == caps
        # each row's KV state was stored as plain decoding stores it: its prompt and what it emitted
        assert sorted(batch.prompt_cache.snapshots()) == sorted(alone.prompt_cache.snapshots())
        assert len(batch.prompt_cache.snapshots()) == 2
    plain, _ = together(model, prompts, [30, 30], False)
    drafted, batch = together(model, prompts, [30, 30], True)
    assert batch.speculator is not None and batch.speculator.together > 0
    end = plain[1][len(plain[1]) // 2]  # a token the second row emits, made the end token
    ended, _ = together(model, prompts, [30, 30], False, eos=[end])
    assert together(model, prompts, [30, 30], True, eos=[end])[0] == ended
    if attention == SEEDED:
        seeded = {"temperature": 0.5, "seed": 3}
        assert (
            together(model, prompts, [24, 24], True, **seeded)[0]
            == together(model, prompts, [24, 24], False, **seeded)[0]
        )


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


SAMPLED = [
    {"temperature": 0.3},
    {"temperature": 0.3, "top_p": 0.9},
    {"temperature": 0.3, "min_p": 0.05},
    {"temperature": 1.5, "top_k": 5},
    {"temperature": 0.3, "top_k": 20, "repetition_penalty": 1.1},
]


@pytest.mark.parametrize("sampling", SAMPLED, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_seeded_sampled_output_is_identical_with_drafts(model: Any, device: None, sampling: dict[str, Any]) -> None:
    """A sampled row draws each drafted position with the key plain decoding would use there, so a
    seed gives the same tokens with drafts or without — drafts accepted and rejected alike.

    Up to float rounding: a verify pass computes k + 1 positions at once (NumPy's attention where
    plain decoding uses mlx's: logits ~1e-6 apart), and a draw over the whole vocabulary of the
    random test model, nearly flat once a penalty pushes its favourites down, can then land on the
    next token over — so the penalty runs with top-k, as real defaults do. A wrong key or penalty
    would part every seed's output at its first drafted step; 7 of 8 identical is the bar."""
    proposed = accepted = 0
    identical = []
    for seed in range(1, 9):
        (a, fa, _), (b, fb, _), batch = plain_and_drafted(model, LOOPED, 40, seed=seed, **sampling)
        identical.append(b == a and fb == fa)
        assert batch.speculator is not None
        proposed += batch.speculator.proposed
        accepted += batch.speculator.accepted
    assert sum(identical) >= 7, identical
    assert proposed > accepted > 0  # both of the rule's outcomes were exercised


def test_a_draft_is_accepted_with_its_probability(device: None) -> None:
    """The acceptance rule for a draft that is one token for sure, "accept while the draw equals
    it": the draft is accepted with its token's probability and the token emitted there follows the
    model's distribution; each position draws with a key of its own (statistically, 4σ)."""
    import mlx.core as mx

    from tinytitan.engine.device.sampling import Sampler
    from tinytitan.engine.device.speculative import _draw

    p = [0.5, 0.3, 0.15, 0.05]
    sampler = Sampler(1.0, seed=11)
    n = 4000
    counts, same = [0, 0, 0, 0], 0
    for _ in range(n):
        picks, keys = _draw(sampler, mx.log(mx.array([p, p])))
        first, second = (int(t) for t in picks.tolist())
        counts[first] += 1
        same += first == second
        assert len(keys) == 2 and sampler.key is keys[-1]

    def near(seen: int, expected: float) -> bool:
        return abs(seen / n - expected) < 4 * (expected * (1 - expected) / n) ** 0.5

    assert all(near(counts[token], share) for token, share in enumerate(p)), counts  # accepted: counts[draft]
    assert near(same, sum(share * share for share in p)), same
