"""Drafts from a draft model (``serve --draft-model``): a smaller model with the same tokenizer
guesses the next tokens greedily, and the verify pass (``speculative.py``) checks them in one
forward pass of the served model.

``ModelDrafts`` follows one row at a time with a KV cache of its own. It keeps the tokens that cache
holds; each ``propose`` trims the cache back to where they stop agreeing with the row's tokens (the
drafts the served model rejected) and feeds what it lacks. A row's prompt is fed a chunk
(``CATCH_UP`` tokens) per step while the row decodes plainly, so a long prompt costs no step more
than one chunk of the small model and a client that leaves is still noticed within a step.

Whether a draft model pays depends on the machine and the text: each draft token costs a step of the
small model, and a step that drafts must wait for the pending token. ``Pace`` measures it as rows
decode — seconds per emitted token of the steps the draft model drafted against plain steps (one is
measured first), from one step's start to the next's — and rests the draft model while its steps
cost more (for ``REST_MIN`` steps, then twice as many, … up to ``REST_MAX``, after each of which it
drafts once more to measure again).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["CATCH_UP", "REST_MAX", "REST_MIN", "ModelDrafts", "Pace"]

CATCH_UP = 512  # prompt tokens the draft model takes in per step until it holds the row's context
REST_MIN, REST_MAX = 8, 256  # steps the draft model rests after costing more a token than plain ones
_WEIGHT = 0.3  # of the latest step in a kind's running cost


class Pace:
    """Seconds per token of the lone row's plain steps and of its draft model's steps."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.cost: dict[str, float] = {}  # "plain" | "model" -> running seconds per emitted token
        self.rests = 0  # times the draft model was rested (tests, benchmarks)
        self._began: float | None = None
        self._open: tuple[float, str, int] | None = None  # the last step: its start, kind, tokens
        self._rest = 0  # steps left before the draft model drafts again
        self._backoff = REST_MIN

    def begin(self) -> None:
        """A step starts: the previous one (its kind and tokens told by ``end``) ends now."""
        now = self.clock()
        if self._open is not None:
            began, kind, tokens = self._open
            if kind in ("plain", "model") and tokens:
                cost = (now - began) / tokens
                was = self.cost.get(kind)
                self.cost[kind] = cost if was is None else (1 - _WEIGHT) * was + _WEIGHT * cost
        self._began, self._open = now, None

    def end(self, kind: str | None, tokens: int) -> None:
        if self._began is not None and kind is not None:
            self._open = (self._began, kind, tokens)

    def pays(self) -> bool:
        """Whether this step may use the draft model: not before a plain step was measured, nor
        while it rests; else while it costs no more a token than a plain step (or is not measured)."""
        if self._rest:
            self._rest -= 1
            return False
        model, plain = self.cost.get("model"), self.cost.get("plain")
        if plain is None:
            return False
        if model is None:
            return True
        if model <= plain:
            self._backoff = REST_MIN
            return True
        self._rest, self._backoff = self._backoff, min(REST_MAX, 2 * self._backoff)
        self.cost.pop("model")  # measured afresh when it drafts again
        self.rests += 1
        return False


class ModelDrafts:
    """Greedy drafts of ``model`` for the lone decoding row."""

    def __init__(self, model: Any, pace: Pace | None = None) -> None:
        self.model = model
        self.pace = pace or Pace()
        self._uid = -1  # the row the cache follows
        self._cache: list[Any] = []
        self._held: list[int] = []  # the tokens the cache holds, in order

    def behind(self, uid: int, tokens: Sequence[int]) -> bool:
        """Take in up to ``CATCH_UP`` of the row's tokens the cache lacks; True while some remain
        (more than a draft's own few), so this step should not wait for the draft model."""
        held = self._follow(uid, tokens)
        missing = len(tokens) - held
        if missing <= CATCH_UP // 8:
            return False
        self._feed(tokens[held : held + min(missing, CATCH_UP)], logits=False)
        return len(tokens) - len(self._held) > CATCH_UP // 8

    def propose(self, uid: int, tokens: Sequence[int], y: int, k: int) -> list[int]:
        """``k`` greedy tokens of the draft model after ``tokens`` and then ``y``."""
        import mlx.core as mx

        held = self._follow(uid, tokens)
        logits = self._feed([*tokens[held:], y])
        out: list[int] = []
        while True:
            token = mx.argmax(logits, axis=-1).item()
            assert isinstance(token, int)
            out.append(token)
            if len(out) == k:
                return out
            logits = self._feed(out[-1:])

    def _follow(self, uid: int, tokens: Sequence[int]) -> int:
        """How many leading tokens of ``tokens`` the cache holds, after trimming it to them."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

        held = self._held
        same = 0
        if uid == self._uid and list(tokens[: len(held)]) == held:  # the usual case, compared in C
            same = len(held)
        elif uid == self._uid:
            limit = min(len(held), len(tokens))
            while same < limit and held[same] == tokens[same]:
                same += 1
        if uid != self._uid or (same < len(held) and not can_trim_prompt_cache(self._cache)):
            self._uid, self._cache, self._held = uid, make_prompt_cache(self.model), []
            return 0
        if same < len(held):
            trim_prompt_cache(self._cache, len(held) - same)
            del held[same:]
        return same

    def _feed(self, tokens: Sequence[int], *, logits: bool = True) -> Any:
        """Run the draft model over ``tokens`` (appended to its cache): the last one's logits,
        evaluated (``logits=False``: only the cache, so the LM head is never computed)."""
        import mlx.core as mx

        out = self.model(mx.array([list(tokens)], dtype=mx.uint32), cache=self._cache)[0, -1]
        mx.eval(out if logits else [c.state for c in self._cache])
        self._held.extend(int(t) for t in tokens)
        return out
