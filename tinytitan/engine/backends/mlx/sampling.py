"""Sampling for the mlx backend: ``mlx_lm.sample_utils`` plus penalties as logits processors.

The penalties look at the whole sequence, not only the part ``generate_step`` saw: with a prompt
cache hit, ``generate_step`` only receives the un-cached tail, so the processors are given the
reused prefix too — a cache hit never changes what is sampled.

- repetition penalty (HF semantics, sign-aware ×): the last ``REPETITION_WINDOW`` tokens of
  prompt + generated text;
- presence penalty (OpenAI semantics, additive): every distinct token generated so far.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

from tinytitan.engine.request import Sampling

__all__ = ["REPETITION_WINDOW", "make_processors", "make_sampler", "seed_sampling"]

REPETITION_WINDOW = 256

LogitsProcessor = Callable[[Any, Any], Any]


def make_sampler(sampling: Sampling) -> Callable[[Any], Any]:
    from mlx_lm.sample_utils import make_sampler as _make

    temperature = float(sampling.temperature or 0.0)
    sampler: Callable[[Any], Any] = _make(
        temp=temperature,
        top_p=float(sampling.top_p if sampling.top_p is not None else 1.0),
        top_k=int(sampling.top_k or 0),
    )
    return sampler


def seed_sampling(sampling: Sampling) -> None:
    """A request's seed makes sampling reproducible; without one, a fresh random state."""
    import mlx.core as mx

    mx.random.seed(sampling.seed if sampling.seed is not None else secrets.randbits(63))


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
