"""Drafts from a draft model (``--draft-model``): output identical to plain decoding, greedy and
seeded, whatever the draft model guesses; a long prompt is taken in a chunk per step.

Drives ``MlxBatch`` directly on the tiny real model, on this test's device thread, on the CPU
(``testing.device.EXACT``). The prompt lookup is switched off where a test is about the draft model
alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tinytitan.engine.device.draft_model import CATCH_UP, ModelDrafts, Pace
from tinytitan.engine.device.mlx_batch import MlxBatch
from tinytitan.engine.device.placement import device_context
from tinytitan.engine.request import Sampling
from tinytitan.testing.batches import collect, row
from tinytitan.testing.device import EXACT

PROMPT = list(range(300, 360))  # no n-gram repeats: the lookup has nothing to offer at first


@pytest.fixture(scope="module", autouse=True)
def mlx_attention() -> Iterator[None]:
    """mlx's own attention for every pass: the CPU attention in NumPy (installed process-wide once a
    float32 CPU model loaded) takes only multi-token passes, and its ~1e-6 differences from mlx's
    flip seeded draws on the random model's flat distributions (``test_speculative.py`` runs both
    attentions with a bar for that; here the draft model's logic is what is tested)."""
    from tinytitan.engine.models.mlx import cpu_attention

    was = cpu_attention.installed()
    cpu_attention.uninstall()
    yield
    if was:
        cpu_attention.install()


@pytest.fixture(scope="module")
def models(tiny_dir: Any) -> tuple[Any, Any, Any]:
    """The tiny model, a second copy of it (a draft that agrees) and a copy with other weights."""
    from tinytitan.engine.device import thread as device_thread

    with device_thread.claimed(beside_workers=True), device_context(EXACT):
        import mlx.core as mx
        from mlx.utils import tree_map
        from mlx_lm import load

        model, same, other = (load(str(tiny_dir))[0] for _ in range(3))
        key = mx.random.key(7)
        other.update(tree_map(lambda w: w + 0.05 * mx.random.normal(w.shape, key=key), other.parameters()))
        mx.eval(other.parameters())
    return model, same, other


def decode(
    model: Any, prompts: list[list[int]], n: int | list[int], *, drafts: Any = False, lookup: bool = True, **kw: Any
) -> Any:
    """Each prompt's tokens, ``n`` (or ``n[i]``) of them (``drafts``: False, True for the lookup alone,
    or a draft model)."""
    from tinytitan.engine.prompt_cache.memory import PromptCache

    draft_model = drafts if drafts not in (False, True) else None
    batch = MlxBatch(
        model, PromptCache(4), "m", [], 2, drafts=drafts is not False, draft_model=draft_model, device=EXACT
    )
    if not lookup:
        assert batch.speculator is not None
        batch.speculator.lookup = False
    if batch.speculator is not None and batch.speculator.model is not None:
        batch.speculator.model.pace = Pace(lambda: 0.0)  # a clock that stands still: it always pays (no timing)
    try:
        sampling = Sampling(**{"temperature": 0.0, **kw})
        caps = n if isinstance(n, list) else [n] * len(prompts)
        return collect(batch, [row(p, cap, sampling) for p, cap in zip(prompts, caps, strict=True)]), batch.speculator
    finally:
        batch.close()


def test_greedy_output_is_identical_whatever_the_draft_model_guesses(models: Any, device: None) -> None:
    model, same, other = models
    (plain,), _ = decode(model, [PROMPT], 40)
    (agreed,), agreeing = decode(model, [PROMPT], 40, drafts=same, lookup=False)
    (guessed,), guessing = decode(model, [PROMPT], 40, drafts=other, lookup=False)
    assert agreed == plain and guessed == plain and len(plain) == 40
    assert agreeing.from_model == agreeing.proposed > 0
    assert agreeing.accepted >= 0.9 * agreeing.proposed  # the same weights: it guesses right
    assert guessing.from_model == guessing.proposed > 0
    assert guessing.accepted < agreeing.accepted  # other weights: it guesses worse, the output does not change


def test_the_lookup_first_then_the_draft_model(models: Any, device: None) -> None:
    model, same, _ = models
    looped = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4 + [11, 12, 13]
    (plain,), _ = decode(model, [looped], 40)
    (both,), speculator = decode(model, [looped], 40, drafts=same)
    assert both == plain
    assert 0 < speculator.from_model < speculator.proposed  # the lookup drafted some steps, the model others


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_sampled_output_is_identical(models: Any, device: None, seed: int) -> None:
    model, same, other = models
    sampling: dict[str, Any] = {"temperature": 0.6, "top_p": 0.9, "seed": seed}
    (plain,), _ = decode(model, [PROMPT], 30, **sampling)
    for draft in (same, other):
        (drafted,), speculator = decode(model, [PROMPT], 30, drafts=draft, lookup=False, **sampling)
        assert drafted == plain and speculator.from_model > 0


def test_caps_are_hit_exactly(models: Any, device: None) -> None:
    model, same, _ = models
    for n in (1, 2, 3, 5, 9, 17):
        (plain,), _ = decode(model, [PROMPT], n)
        (drafted,), _ = decode(model, [PROMPT], n, drafts=same, lookup=False)
        assert drafted == plain and len(drafted) == n


def test_a_long_prompt_is_taken_in_a_chunk_per_step(models: Any, device: None) -> None:
    """The draft model catches up over several plain steps, then drafts; the output never changes."""
    model, same, _ = models
    long = [300 + (i * 7919) % 5000 for i in range(3 * CATCH_UP + 40)]
    (plain,), _ = decode(model, [long], 24)
    (drafted,), speculator = decode(model, [long], 24, drafts=same, lookup=False)
    assert drafted == plain
    assert speculator.from_model > 0  # it caught up before the cap …
    assert speculator.from_model <= 24 - 3  # … after at least three plain steps (one chunk each)


def test_rows_at_once_and_one_after_another(models: Any, device: None) -> None:
    """Two rows share steps plainly; the one left alone drafts, the draft model following it."""
    model, same, _ = models
    short, longer = PROMPT[:20], PROMPT[20:]
    plain, _ = decode(model, [short, longer], [10, 40])
    drafted, speculator = decode(model, [short, longer], [10, 40], drafts=same, lookup=False)
    assert drafted == plain and speculator.from_model > 0
    for prompt in (short, longer):  # one after another: the draft's cache starts again for each row
        assert decode(model, [prompt], 30, drafts=same, lookup=False)[0] == decode(model, [prompt], 30)[0]


def test_the_draft_cache_is_trimmed_to_the_row(models: Any, device: None) -> None:
    """Rejected drafts leave the draft model's cache: it holds a prefix of the row's tokens."""
    other = models[2]
    drafts = ModelDrafts(other)
    tokens = PROMPT[:10]
    guess = drafts.propose(1, tokens, 400, 4)
    assert len(guess) == 4 and drafts._held == [*tokens, 400, *guess[:3]]
    accepted = [*tokens, 400, guess[0], 999]  # the first guess kept, then the served model chose 999
    drafts.propose(1, accepted, 401, 2)
    assert drafts._held[: len(accepted) + 1] == [*accepted, 401]
    assert drafts._cache[0].offset == len(drafts._held)
    drafts.propose(2, [5, 6], 7, 1)  # another row: a fresh cache
    assert drafts._held == [5, 6, 7] and drafts._cache[0].offset == 3


class Clock:
    """A clock that advances by what the step about to be timed costs (set by the test)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.plain = 1.0  # seconds a plain step takes
        self.model = 1.0  # … a step the draft model drafted

    def __call__(self) -> float:
        return self.now


def paced(model: Any, draft: Any, clock: Clock, n: int) -> tuple[list[int], Any, list[str | None]]:
    """Decode with the draft model alone, the clock advanced per step by that step's kind's cost;
    the tokens, the speculator and each step's kind."""
    from tinytitan.engine.prompt_cache.memory import PromptCache

    batch = MlxBatch(model, PromptCache(4), "m", [], 1, drafts=True, draft_model=draft, device=EXACT)
    speculator = batch.speculator
    assert speculator is not None and speculator.model is not None
    speculator.lookup = False
    speculator.model.pace = Pace(clock)
    step = speculator._step
    kinds: list[str | None] = []

    def timed(gen: Any, draftable: Any) -> Any:
        responses, kind = step(gen, draftable)
        kinds.append(kind)
        clock.now += clock.model if kind == "model" else clock.plain
        return responses, kind

    speculator._step = timed  # type: ignore[method-assign]
    try:
        (tokens,) = collect(batch, [row(PROMPT, n, Sampling(temperature=0.0))])
        return tokens, speculator, kinds
    finally:
        batch.close()


def test_a_draft_model_that_costs_more_a_token_rests(models: Any, device: None) -> None:
    model, _, other = models
    (plain,), _ = decode(model, [PROMPT], 60)
    clock = Clock()
    clock.model = 5.0  # a guess rarely right (other weights) and dear: more a token than plain steps
    tokens, speculator, kinds = paced(model, other, clock, 60)
    assert tokens == plain
    assert speculator.model.pace.rests >= 2  # rested, tried again, rested longer
    assert kinds.count("model") <= 4 and kinds.count("plain") >= 45  # a few probes, not a draft every step


def test_a_draft_model_that_pays_keeps_drafting(models: Any, device: None) -> None:
    model, same, _ = models
    (plain,), _ = decode(model, [PROMPT], 60)
    clock = Clock()
    clock.model = 1.5  # a little dearer a step than plain, but it emits several tokens a step
    tokens, speculator, kinds = paced(model, same, clock, 60)
    assert tokens == plain
    assert speculator.model.pace.rests == 0 and kinds.count("plain") == 1  # measured once, then drafts
    assert speculator.from_model >= 40
