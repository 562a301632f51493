"""Sampling for the mlx backend: a top-k-first sampler with transformers' semantics, plus penalties.

Order — that of transformers' ``GenerationMixin._get_logits_processor``, which a model's
``generation_config.json`` is written for: **temperature → top-k → top-p → min-p → draw**.

- temperature 0: argmax (greedy; the other settings are ignored, as in HF without ``do_sample``);
- top-k: tokens below the k-th largest logit are cut; every token tied at the k-th logit survives
  (HF's ``scores < topk[..., -1]``), so more than k may remain;
- top-p, on the top-k survivors renormalised: a token survives while the mass ranked above it is
  below ``top_p`` (HF cuts ``cumsum(ascending) <= 1 - top_p``: the same cut from the other end);
  the most likely token always survives, so ``top_p`` 0 is greedy. Tokens tied at the cut
  survive or go together (HF leaves that to its sort order);
- min-p: a token survives when its tempered probability is at least ``min_p`` × the best one's;
- draw: inverse CDF over the survivors with a uniform from the sampler's own key.

mlx-lm's ``make_sampler`` (0.32) differs: top-p and min-p see the *untempered* distribution, top-k
comes last, and top-p sorts the whole vocabulary every token. Here top-k comes first, on the
log-probabilities (temperature keeps their order): the k blocks of ``BLOCK`` tokens with the
largest maxima hold every token above the k-th logit, so one argpartition over k × BLOCK
candidates finds the k survivors; the tokens tied at the k-th logit are counted over the whole
vocabulary and enter as one entry (a tie drawn there is then drawn uniformly among them). All the
rest works on k + 1 numbers — exact, no full sort, nothing read back.

Without top-k (``top_k`` 0, or ≥ the vocabulary) but with top-p or min-p, the same runs with
``CANDIDATES`` tokens, and top-p needs the whole vocabulary's tempered mass. First stage: bound
the mass below the candidates (log-probabilities sum to 1, so their share at temperature 1 is
known; see ``_whole_mass``); second stage: sum it (one exp over the vocabulary). A stage settles
the draw when the cut is the same at both ends of the bound and leaves out every token below the
candidates (or the last candidate already fails min-p); when neither does (a very flat
distribution) the draw is redone over the fully sorted vocabulary. Each stage reads one flag
back, so this path syncs once or twice per token. Plain temperature uses
``mx.random.categorical`` over the vocabulary.

Seeding: each sampler owns a PRNG key — from the request's seed, or fresh random bits — split on
every draw and passed as ``key=`` to mlx's random functions. mlx's global random state is never
used, so a request's draws do not depend on other requests (and batched rows can keep one key each).

The penalties look at the whole sequence, not only the part ``generate_step`` saw: with a prompt
cache hit, ``generate_step`` only receives the un-cached tail, so the processors are given the
reused prefix too — a cache hit never changes what is sampled.

- repetition penalty (HF semantics, sign-aware ×): the last ``REPETITION_WINDOW`` tokens of
  prompt + generated text;
- presence penalty (OpenAI semantics, additive): every distinct token generated so far.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tinytitan.engine.request import Sampling

__all__ = [
    "BLOCK",
    "CANDIDATES",
    "NORMALISATION_SLACK",
    "PAIRWISE",
    "REPETITION_WINDOW",
    "Sampler",
    "make_processors",
    "make_sampler",
]

REPETITION_WINDOW = 256
BLOCK = 128  # tokens per block of the top-k prefilter (at most; fewer when k × BLOCK nears the vocabulary)
CANDIDATES = 1024  # without top-k: the top-p / min-p cut is looked for among this many tokens first
PAIRWISE = 64  # up to this many entries, top-p compares them pairwise instead of sorting
NORMALISATION_SLACK = 1e-4  # how far float32 log-probabilities may miss summing to 1

LogitsProcessor = Callable[[Any, Any], Any]


class Sampler:
    """Draws one token per row of ``(rows, vocab)`` log-probabilities; callable as mlx-lm's sampler.

    ``misses`` counts the draws without top-k that the bounded stage, and then the exact-total
    stage, could not settle among ``CANDIDATES`` (``misses["exact"]`` were redone over the fully
    sorted vocabulary).
    """

    def __init__(
        self,
        temperature: float,
        *,
        top_k: int = 0,
        top_p: float = 1.0,
        min_p: float = 0.0,
        seed: int | None = None,
    ) -> None:
        import mlx.core as mx

        self.temperature = float(temperature)
        self.top_k = max(0, int(top_k))
        self.top_p = min(1.0, max(0.0, float(top_p)))
        self.min_p = min(1.0, max(0.0, float(min_p)))
        self.key = mx.random.key(seed if seed is not None else secrets.randbits(64))
        self.misses = {"bound": 0, "exact": 0}  # no-top-k draws not settled at that stage

    def __call__(self, logprobs: Any) -> Any:
        import mlx.core as mx

        if self.temperature <= 0.0:
            return mx.argmax(logprobs, axis=-1)
        self.key, key = mx.random.split(self.key)
        x = logprobs if logprobs.ndim == 2 else logprobs.reshape(-1, logprobs.shape[-1])
        vocab = x.shape[-1]
        cut = _Cut(1.0 / self.temperature, self.top_p if self.top_p < 1.0 else None, self.min_p)
        if 0 < self.top_k < vocab:
            token, _ = _draw(x, self.top_k, cut, key)
        elif cut.top_p is None and cut.min_p == 0.0:  # plain temperature: nothing to cut
            token = mx.random.categorical(x * cut.inv_t, axis=-1, key=key)
        elif vocab <= CANDIDATES:
            token, _ = _draw(x, vocab, cut, key)
        else:  # no top-k: look for the cut among CANDIDATES, bounding the rest's mass, then exactly
            stages = ("exact",) if x.dtype != mx.float32 else ("bound", "exact") if cut.top_p else ("bound",)
            for rest in stages:
                token, exact = _draw(x, CANDIDATES, cut, key, rest=rest)
                if bool(mx.all(exact).item()):
                    break
                self.misses[rest] += 1
            else:
                token, _ = _draw(x, vocab, cut, key)
        return token if logprobs.ndim == 2 else token.reshape(logprobs.shape[:-1])


class _Cut(NamedTuple):
    inv_t: float  # 1 / temperature
    top_p: float | None  # None: no top-p
    min_p: float  # 0: no min-p


def _draw(x: Any, k: int, cut: _Cut, key: Any, *, rest: str | None = None) -> tuple[Any, Any]:
    """One token per row of log-probabilities ``x`` (rows, vocab): top-k, then top-p and min-p.

    With ``rest`` (no top-k: the k tokens are only candidates) top-p is normalised over the whole
    vocabulary — the mass below the k-th logit bounded (``"bound"``, from the log-probabilities
    summing to 1) or summed (``"exact"``) — and the second result says, per row, whether the cut
    provably fell among the candidates (else the token is not to be used).
    """
    import mlx.core as mx

    rows, vocab = x.shape
    block = _block_size(vocab, k)
    nblocks = -(-vocab // block)
    if nblocks * block != vocab:
        x = mx.concatenate([x, mx.full((rows, nblocks * block - vocab), -math.inf, dtype=x.dtype)], axis=-1)
    xb = x.reshape(rows, nblocks, block)
    if block > 1:  # the k blocks with the largest maxima hold every token above the k-th logit
        blocks = mx.argpartition(mx.max(xb, axis=-1), kth=nblocks - k, axis=-1)[:, nblocks - k :]
        flat = blocks + (mx.arange(rows) * nblocks)[:, None] if rows > 1 else blocks
        cand = mx.take(xb.reshape(rows * nblocks, block), flat, axis=0).reshape(rows, k * block)
        ids = (blocks[..., None] * block + mx.arange(block)).reshape(rows, k * block)
    else:
        cand, ids = x, mx.broadcast_to(mx.arange(vocab), (rows, vocab))
    if k < cand.shape[-1]:
        part = mx.argpartition(cand, kth=cand.shape[-1] - k, axis=-1)[:, -k:]
        cand, ids = mx.take_along_axis(cand, part, axis=-1), mx.take_along_axis(ids, part, axis=-1)
        kth = cand[:, :1]  # the partition's pivot: the k-th largest
    else:
        kth = mx.min(cand, axis=-1, keepdims=True)
    tie_counts = mx.sum(xb == kth[..., None], axis=-1)  # (rows, nblocks): tokens tied at the k-th logit
    ties = mx.sum(tie_counts, axis=-1, keepdims=True)
    # Entry 0 stands for every token tied at the k-th logit (drawn uniformly among them below); the
    # k candidates follow, those tied at the k-th logit with weight 0.
    v = mx.concatenate([kth, cand], axis=-1).astype(mx.float32)
    z = (v - mx.max(v, axis=-1, keepdims=True)) * cut.inv_t  # tempered log-weights, best token 0
    mult = mx.concatenate([ties, cand != kth], axis=-1).astype(mx.float32)  # tokens per entry
    w = mx.exp(z) * mult
    keep = None
    same_cut, tail_out = None, None  # (rest) the cut is known exactly / excludes every other token
    if cut.top_p is not None:
        total = mx.sum(w, axis=-1, keepdims=True)  # mass of every token at or above the k-th logit
        above = _mass_above(v, w)
        top_p = max(cut.top_p, 1e-30)  # the best token always survives (top_p 0 is greedy)
        if rest is None:
            keep = above < top_p * total
        else:
            low, high = _whole_mass(x, v, mult, total, cut.inv_t, exact=rest == "exact")
            keep = above < top_p * low
            same_cut = mx.all(keep == (above < top_p * high), axis=-1, keepdims=True)
            tail_out = total >= top_p * high
    if cut.min_p > 0.0:
        passes = z >= math.log(cut.min_p)
        keep = passes if keep is None else mx.logical_and(keep, passes)
        if rest is not None:  # the k-th logit fails min-p: so does every token below it
            fails = z[:, :1] < math.log(cut.min_p)
            tail_out = fails if tail_out is None else mx.logical_or(tail_out, fails)
    exact = None
    if rest is not None:
        assert tail_out is not None  # rest comes only with top-p or min-p, and each sets tail_out
        exact = tail_out if same_cut is None else mx.logical_and(same_cut, tail_out)
    if keep is not None:
        w = mx.where(keep, w, 0.0)
    u = mx.random.uniform(shape=(rows, 2), key=key)
    cum = mx.cumsum(w, axis=-1)
    pick = mx.minimum(mx.sum(cum <= u[:, :1] * cum[:, -1:], axis=-1, keepdims=True), k)
    chosen = mx.take_along_axis(mx.concatenate([ids[:, :1], ids], axis=-1), pick, axis=-1)
    tied = _pick_tie(xb, tie_counts, ties, kth, u[:, 1:])
    token = mx.where(pick == 0, tied, chosen).reshape(rows)
    return (token if nblocks * block == vocab else mx.minimum(token, vocab - 1)), exact  # not a padding slot


def _mass_above(v: Any, w: Any) -> Any:
    """Per entry, the mass ``w`` of the entries with a higher value ``v`` (so ties share a cut)."""
    import mlx.core as mx

    rows, n = v.shape
    if n <= PAIRWISE:
        return mx.sum(mx.where(v[:, None, :] > v[:, :, None], w[:, None, :], 0.0), axis=-1)
    order = mx.argsort(v, axis=-1)  # ascending
    sorted_v = mx.take_along_axis(v, order, axis=-1)
    upto = mx.cumsum(mx.take_along_axis(w, order, axis=-1), axis=-1)
    last = mx.concatenate([sorted_v[:, 1:] != sorted_v[:, :-1], mx.ones((rows, 1), dtype=mx.bool_)], axis=-1)
    run_end = mx.cummin(mx.where(last, mx.arange(n), n), axis=-1, reverse=True)  # last of each tie run
    above = upto[:, -1:] - mx.take_along_axis(upto, run_end, axis=-1)
    return mx.take_along_axis(above, mx.argsort(order, axis=-1), axis=-1)


def _whole_mass(x: Any, v: Any, mult: Any, total: Any, inv_t: float, *, exact: bool) -> tuple[Any, Any]:
    """Bounds (low, high) of the whole vocabulary's tempered mass, in units of the best token's.

    ``v`` holds the k-th logit then the candidates, ``mult`` how many tokens each entry stands for
    and ``total`` their tempered mass. ``exact`` sums the vocabulary (one exp over it). Otherwise
    the tokens below the k-th logit hold ``1 − (the candidates' probability)`` at temperature 1
    (log-probabilities sum to 1, up to ``NORMALISATION_SLACK``); at 1/T = a ≥ 1 their tempered
    mass is at most ``p_k^(a−1)`` times that, at a < 1 at most ``n^(1−a)`` times its a-th power
    (Hölder), and never more than ``n × p_k^a``.
    """
    import mlx.core as mx

    best = mx.max(v, axis=-1, keepdims=True)
    if exact:
        whole = mx.sum(mx.exp((x.astype(mx.float32) - best) * inv_t), axis=-1, keepdims=True)
        return whole, whole
    kth = v[:, :1]
    n = max(1, x.shape[-1] - v.shape[-1] + 1)  # at most this many tokens below the k-th logit
    below = mx.maximum(1.0 - mx.sum(mx.exp(v) * mult, axis=-1, keepdims=True), 0.0) + NORMALISATION_SLACK
    log_rest = math.log(n) + (kth - best) * inv_t
    if inv_t > 1.0:
        log_rest = mx.minimum(log_rest, mx.log(below) + (inv_t - 1.0) * kth - inv_t * best)
    else:
        log_rest = mx.minimum(log_rest, (1.0 - inv_t) * math.log(n) + inv_t * mx.log(below) - inv_t * best)
    return total, total + mx.exp(log_rest)


def _pick_tie(xb: Any, tie_counts: Any, ties: Any, kth: Any, u: Any) -> Any:
    """The token ranked ``floor(u × ties)`` (vocabulary order) among those equal to ``kth``, per row."""
    import mlx.core as mx

    rows, nblocks, block = xb.shape
    r = (u * ties).astype(mx.int32)  # floor: both are ≥ 0
    before = mx.cumsum(tie_counts, axis=-1, inclusive=False)
    b = mx.sum(before <= r, axis=-1, keepdims=True) - 1  # the block holding tie number r
    r = r - mx.take_along_axis(before, b, axis=-1)
    flat = b + (mx.arange(rows) * nblocks)[:, None] if rows > 1 else b
    row = mx.take(xb.reshape(rows * nblocks, block), flat.reshape(-1), axis=0)  # (rows, block)
    pos = mx.sum(mx.cumsum(row == kth, axis=-1) <= r, axis=-1, keepdims=True)
    return b * block + pos


def _block_size(vocab: int, k: int) -> int:
    """The largest power of two ≤ BLOCK with k blocks covering at most a quarter of the vocabulary."""
    block = BLOCK
    while block > 1 and k * block * 4 > vocab:
        block //= 2
    return block


def make_sampler(sampling: Sampling) -> Sampler:
    """The request's sampler (its seed, or a fresh random key when it has none)."""
    return Sampler(
        float(sampling.temperature or 0.0),
        top_k=int(sampling.top_k or 0),
        top_p=float(sampling.top_p if sampling.top_p is not None else 1.0),
        min_p=float(sampling.min_p or 0.0),
        seed=sampling.seed,
    )


def make_processors(sampling: Sampling, prompt: Sequence[int], reused: int) -> list[LogitsProcessor]:
    """Logits processors for ``generate_step`` fed ``prompt[reused:]``."""
    import mlx.core as mx

    processors: list[LogitsProcessor] = []
    fed = len(prompt) - reused  # how many tokens generate_step sees before the generated ones
    penalty = sampling.repetition_penalty
    if penalty is not None and penalty != 1.0:
        head = mx.array(list(prompt[max(0, reused - REPETITION_WINDOW) : reused]), dtype=mx.uint32)

        def repetition(tokens: Any, logits: Any) -> Any:
            context = mx.concatenate([head, tokens.astype(mx.uint32)])[-REPETITION_WINDOW:]
            selected = logits[:, context]
            selected = mx.where(selected < 0, selected * penalty, selected / penalty)
            logits[:, context] = selected
            return logits

        processors.append(repetition)
    presence = sampling.presence_penalty
    if presence:

        def present(tokens: Any, logits: Any) -> Any:
            generated = tokens[fed:]
            if generated.size == 0:
                return logits
            logits[:, generated] = logits[:, generated] - presence
            return logits

        processors.append(present)
    return processors
