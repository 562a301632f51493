"""Drafts from a draft model (``serve --draft-model``): a smaller model with the same tokenizer
guesses the next tokens greedily, and the verify pass (``speculative.py``) checks them in one
forward pass of the served model.

``ModelDrafts`` follows one row at a time with a KV cache of its own. It keeps the tokens that cache
holds; each ``propose`` trims the cache back to where they stop agreeing with the row's tokens (the
drafts the served model rejected) and feeds what it lacks. A row's prompt is fed a chunk
(``CATCH_UP`` tokens) per step while the row decodes plainly, so a long prompt costs no step more
than one chunk of the small model and a client that leaves is still noticed within a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CATCH_UP", "ModelDrafts"]

CATCH_UP = 512  # prompt tokens the draft model takes in per step until it holds the row's context


class ModelDrafts:
    """Greedy drafts of ``model`` for the lone decoding row."""

    def __init__(self, model: Any) -> None:
        self.model = model
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
            token = mx.argmax(logits, axis=-1)
            out.append(int(token.item()))
            if len(out) == k:
                return out
            logits = self._feed(out[-1:])

    def _follow(self, uid: int, tokens: Sequence[int]) -> int:
        """How many leading tokens of ``tokens`` the cache holds, after trimming it to them."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

        held = self._held
        same = 0
        if uid == self._uid:
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
