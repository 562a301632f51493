"""The mlx sampler against a plain numpy implementation of transformers' warpers (issue #11 item 6).

The reference applies HF's ``TemperatureLogitsWarper → TopKLogitsWarper → TopPLogitsWarper →
MinPLogitsWarper`` as transformers writes them (float64), with one stated choice HF leaves to its
sort order: tokens tied at the top-p cut are kept together. Distributions are compared with a
chi-square statistic over many seeded draws, and no token the reference gives probability 0 (cut
by a warper, or masked to -inf) may ever be drawn.
"""

from __future__ import annotations

import math
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from tinytitan.engine.device.sampling import CANDIDATES, PAIRWISE, Sampler, make_sampler
from tinytitan.engine.request import ChatRequest, Message, ModelInfo, Sampling
from tinytitan.engine.request.validate import validate

pytestmark = pytest.mark.usefixtures("device")  # these tests call MLX themselves, as the device worker

VOCAB = 151_936  # Qwen3's vocabulary


def hf_reference(
    logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0
) -> np.ndarray:
    """Token probabilities after HF's warpers, in HF's order (``_get_logits_processor``)."""
    scores = np.asarray(logits, dtype=np.float64) / temperature
    if top_k:  # TopKLogitsWarper: drop scores below the k-th largest (ties at it survive)
        kth = np.sort(scores)[-min(top_k, scores.size)]
        scores = np.where(scores < kth, -np.inf, scores)
    if top_p < 1.0:  # TopPLogitsWarper: ascending sort, drop cumulative mass <= 1 - top_p, keep the top one
        ranked = np.sort(scores)
        probs = _softmax(ranked)
        drop = np.cumsum(probs) <= 1 - top_p
        drop[-1] = False
        scores = np.where(scores < ranked[~drop].min(), -np.inf, scores)  # ties at the cut kept together
    if min_p > 0.0:  # MinPLogitsWarper: drop p < min_p * p_max (the top one always survives)
        probs = _softmax(scores)
        scores = np.where(probs < min_p * probs.max(), -np.inf, scores)
    return _softmax(scores)


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores[np.isfinite(scores)].max())
    return e / e.sum()


def logprobs(logits: np.ndarray) -> np.ndarray:
    """What ``generate_step`` hands a sampler: float32 log-probabilities."""
    finite = logits[np.isfinite(logits)].astype(np.float64)
    return (logits - (finite.max() + np.log(np.exp(finite - finite.max()).sum()))).astype(np.float32)


def draw(sampler: Sampler, logits: np.ndarray, n: int, rows: int) -> np.ndarray:
    """n tokens from ``sampler``, ``rows`` independent rows per call."""
    x = mx.array(np.ascontiguousarray(np.broadcast_to(logprobs(logits), (rows, logits.size))))
    return np.concatenate([np.array(sampler(x)) for _ in range(n // rows)])


def assert_distribution(tokens: np.ndarray, probs: np.ndarray) -> None:
    """Never a token of probability 0, and a chi-square statistic far inside its distribution."""
    drawn = np.unique(tokens)
    assert (probs[drawn] > 0).all(), f"cut or masked tokens drawn: {drawn[probs[drawn] == 0][:10]}"
    support = np.flatnonzero(probs > 0)
    if support.size == 1:
        return
    expected = probs[support] * tokens.size
    observed = np.bincount(tokens, minlength=probs.size)[support]
    small = expected < 5  # merge thin bins so the statistic stays chi-square
    e = np.append(expected[~small], expected[small].sum())
    o = np.append(observed[~small], observed[small].sum())
    e, o = (e[:-1], o[:-1]) if e[-1] == 0 else (e, o)
    df = e.size - 1
    stat = float(((o - e) ** 2 / e).sum())
    assert stat < df + 5 * math.sqrt(2 * df) + 10, f"chi-square {stat:.1f} with {df} degrees of freedom"


def zipf_logits(vocab: int, seed: int, exponent: float = 1.1) -> np.ndarray:
    """Logits shaped like a language model's: log-probabilities falling as rank^-exponent, shuffled."""
    rng = np.random.default_rng(seed)
    logits = -exponent * np.log(np.arange(1, vocab + 1)) + rng.normal(0, 0.05, vocab)
    return rng.permutation(logits).astype(np.float32)


SMALL_CASES: list[dict[str, Any]] = [
    {"temperature": 0.8},
    {"temperature": 0.6, "top_k": 20, "top_p": 0.95},  # Qwen3's generation_config
    {"temperature": 1.3, "top_k": 5},
    {"temperature": 0.7, "top_p": 0.8},
    {"temperature": 1.0, "min_p": 0.1},
    {"temperature": 0.9, "top_k": 30, "top_p": 0.7, "min_p": 0.05},
    {"temperature": 2.0, "top_p": 0.0},
]


@pytest.mark.parametrize("case", SMALL_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_the_reference_on_small_logits(case: dict[str, Any]) -> None:
    logits = np.random.default_rng(3).normal(0.0, 1.5, 64).astype(np.float32)
    tokens = draw(Sampler(seed=11, **case), logits, 40_000, 4_000)
    assert_distribution(tokens, hf_reference(logits, **case))


QWEN: dict[str, Any] = {"temperature": 0.6, "top_k": 20, "top_p": 0.95}  # Qwen3's generation_config
FULL_CASES: list[dict[str, Any]] = [
    QWEN,
    {"temperature": 1.0, "top_k": 40, "min_p": 0.05},
]


@pytest.mark.parametrize("case", FULL_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_the_reference_on_the_real_vocabulary_size(case: dict[str, Any]) -> None:
    logits = zipf_logits(VOCAB, seed=5)
    tokens = draw(Sampler(seed=12, **case), logits, 4_000, 100)
    assert_distribution(tokens, hf_reference(logits, **case))


@pytest.mark.parametrize(("exponent", "settled_by"), [(1.5, "bound"), (1.1, "exact")])
def test_without_top_k_the_cut_is_found_among_the_candidates_without_a_full_sort(
    exponent: float, settled_by: str
) -> None:
    logits = zipf_logits(VOCAB, seed=5, exponent=exponent)
    sampler = Sampler(0.7, top_p=0.9, seed=12)
    tokens = draw(sampler, logits, 1_000, 100)
    assert_distribution(tokens, hf_reference(logits, 0.7, top_p=0.9))
    assert sampler.misses["exact"] == 0  # never a full sort
    assert (sampler.misses["bound"] == 0) == (settled_by == "bound")


@pytest.mark.parametrize(
    ("case", "rows", "calls"),
    [(QWEN, 100, 20), ({"temperature": 1.0, "top_k": 200}, 100, 20), ({"temperature": 0.7, "top_p": 0.9}, 50, 10)],
    ids=["qwen", "ties-at-the-200th", "no-top-k"],
)
def test_bfloat16_log_probabilities(case: dict[str, Any], rows: int, calls: int) -> None:
    rounded = mx.array(logprobs(zipf_logits(VOCAB, seed=7))).astype(mx.bfloat16)
    values = np.array(rounded.astype(mx.float32))
    if case.get("top_k") == 200:
        assert (values == np.sort(values)[-200]).sum() > 1  # bfloat16 ties at the k-th logit
    sampler = Sampler(seed=5, **case)
    x = mx.broadcast_to(rounded[None], (rows, VOCAB)) + mx.zeros((rows, 1), dtype=mx.bfloat16)
    tokens = np.concatenate([np.array(sampler(x)) for _ in range(calls)])
    assert_distribution(tokens, hf_reference(values, **case))


def test_without_top_k_a_flat_distribution_falls_back_to_the_whole_vocabulary_and_stays_exact() -> None:
    logits = np.random.default_rng(8).normal(0.0, 0.2, 2 * CANDIDATES).astype(np.float32)
    sampler = Sampler(1.0, top_p=0.6, seed=13)
    tokens = draw(sampler, logits, 8_000, 1_000)
    assert sampler.misses["exact"] > 0  # the cut lay outside the candidates
    assert_distribution(tokens, hf_reference(logits, 1.0, top_p=0.6))


def test_top_p_one_keeps_every_token() -> None:
    logits = np.random.default_rng(4).normal(0.0, 0.5, 32).astype(np.float32)
    tokens = draw(Sampler(1.0, top_p=1.0, seed=2), logits, 20_000, 2_000)
    assert np.unique(tokens).size == 32
    assert_distribution(tokens, hf_reference(logits, 1.0))


def test_top_k_one_and_temperature_zero_are_the_argmax() -> None:
    logits = zipf_logits(VOCAB, seed=6)
    best = int(np.argmax(logits))
    assert set(draw(Sampler(5.0, top_k=1, seed=1), logits, 300, 100).tolist()) == {best}
    greedy = Sampler(0.0, top_k=20, top_p=0.5, min_p=0.5, seed=1)
    out = greedy(mx.array(logits[None]))
    assert out.shape == (1,) and int(out.item()) == best


@pytest.mark.parametrize("vocab", [64, VOCAB])
def test_every_token_tied_at_the_kth_logit_survives_top_k(vocab: int) -> None:
    rng = np.random.default_rng(9)
    logits = rng.uniform(-8.0, -4.0, vocab).astype(np.float32)
    ties = np.array([3, 17, 40, 63]) if vocab == 64 else np.array([7, 1_000, 50_000, 90_000, 151_935])
    logits[ties] = -2.0  # tied at the k-th logit, spread over different blocks
    logits[[10, 20]] = [0.0, -1.0]
    tokens = draw(Sampler(1.0, top_k=3, seed=4), logits, 20_000 if vocab == 64 else 4_000, 100)
    expected = hf_reference(logits, 1.0, top_k=3)
    assert set(np.flatnonzero(expected)) == {10, 20, *ties.tolist()}
    assert set(tokens.tolist()) == {10, 20, *ties.tolist()}
    assert_distribution(tokens, expected)


@pytest.mark.parametrize("vocab", [32, 4 * PAIRWISE])  # compared pairwise / sorted
def test_tokens_tied_at_the_top_p_cut_stay_together(vocab: int) -> None:
    logits = np.log(np.array([0.4, 0.2, 0.2, 0.2] + [1e-4] * (vocab - 4), dtype=np.float64)).astype(np.float32)
    tokens = draw(Sampler(1.0, top_p=0.5, seed=6), logits, 20_000, 2_000)
    assert set(tokens.tolist()) == {0, 1, 2, 3}
    assert_distribution(tokens, hf_reference(logits, 1.0, top_p=0.5))


def test_min_p_keeps_the_tokens_within_its_share_of_the_best() -> None:
    probs = np.array([0.5, 0.3, 0.12, 0.08])
    logits = np.log(np.concatenate([probs, np.full(60, 1e-3)])).astype(np.float32)
    tokens = draw(Sampler(1.0, min_p=0.2, seed=8), logits, 20_000, 2_000)
    assert set(tokens.tolist()) == {0, 1, 2}  # 0.08 < 0.2 × 0.5
    assert_distribution(tokens, hf_reference(logits, 1.0, min_p=0.2))


@pytest.mark.parametrize(
    "case",
    [
        {"temperature": 0.6, "top_k": 20, "top_p": 0.95},
        {"temperature": 1.5, "top_p": 0.99},
        {"temperature": 1.0, "min_p": 0.01},
        {"temperature": 2.0},
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()),
)
def test_tokens_masked_to_minus_infinity_are_never_drawn(case: dict[str, Any]) -> None:
    logits = np.full(VOCAB, -np.inf, dtype=np.float32)  # a grammar mask allowing three tokens
    allowed = [5, 77_777, 151_935]
    logits[allowed] = [-3.0, -1.0, -2.5]
    tokens = draw(Sampler(seed=3, **case), logits, 300, 100)
    assert set(tokens.tolist()) <= set(allowed)
    assert_distribution(tokens, hf_reference(logits, **case))
    only = np.full(VOCAB, -np.inf, dtype=np.float32)
    only[123] = 0.0
    assert set(draw(Sampler(seed=3, **case), only, 200, 100).tolist()) == {123}


def sequence(sampler: Sampler, steps: list[Any]) -> list[int]:
    return [int(sampler(x).item()) for x in steps]


def test_the_same_seed_gives_the_same_tokens_and_other_requests_do_not_matter() -> None:
    steps = [mx.array(logprobs(zipf_logits(VOCAB, seed=s, exponent=0.5))[None]) for s in range(12)]

    def seeded(seed: int) -> Sampler:
        return Sampler(1.0, top_k=20, top_p=0.95, seed=seed)

    alone = sequence(seeded(21), steps)
    assert sequence(seeded(21), steps) == alone
    assert sequence(seeded(22), steps) != alone
    a, b = seeded(21), seeded(99)
    interleaved = []
    for x in steps:  # another request drawing between ours, and the global random state moving
        b(x)
        mx.random.seed(1234)
        mx.random.uniform(shape=(3,))
        interleaved.append(int(a(x).item()))
    assert interleaved == alone


def test_make_sampler_reads_the_validated_sampling() -> None:
    sampler = make_sampler(Sampling(temperature=0.6, top_p=0.95, top_k=20, seed=7))
    assert (sampler.temperature, sampler.top_k, sampler.top_p, sampler.min_p) == (0.6, 20, 0.95, 0.0)
    logits = mx.array(logprobs(zipf_logits(VOCAB, seed=1))[None])
    again = make_sampler(Sampling(temperature=0.6, top_p=0.95, top_k=20, seed=7))
    assert [int(sampler(logits).item()) for _ in range(5)] == [int(again(logits).item()) for _ in range(5)]
    assert make_sampler(Sampling(temperature=0.0)).temperature == 0.0


def test_a_generation_config_min_p_reaches_the_sampler() -> None:
    request = ChatRequest(model="m", messages=(Message("user", "hi"),), sampling=Sampling(temperature=1.0))
    with_min_p = validate(request, ModelInfo("m", 4096, defaults={"min_p": 0.05, "top_k": 0}))
    assert make_sampler(with_min_p.sampling).min_p == 0.05
    assert make_sampler(with_min_p.sampling).top_k == 0  # top_k 0 in a generation_config: no top-k
    assert validate(request, ModelInfo("m", 4096)).sampling.min_p is None  # no fallback min_p
