"""Prompt-lookup drafts: guess a row's next tokens from text it already holds.

``PromptLookup.propose(tokens)`` looks for the latest n tokens (n = 4, then 3, then 2) earlier in
``tokens`` (the row's prompt and what it generated so far) and proposes the ``k`` tokens that
followed the most recent earlier occurrence — where those run into the suffix itself (a run of one
token, a short cycle), the cycle continued. Coding agents re-emit text from their context (a file
rewritten with a change, a patch, a quoted block), so such guesses are often right; the verify pass
(``speculative.py``) checks them all in one forward pass.

One ``PromptLookup`` follows one row: it keeps an index from each n-gram to where its latest
continuation starts, grown by the tokens ``propose`` has not seen yet (rebuilt if they are not a
continuation of those it has), so a lookup costs a few dict reads however long the context — a
scan of a 4,000-token context per token would cost more than the drafts save on free-form text.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DRAFT_TOKENS", "NGRAMS", "PromptLookup"]

DRAFT_TOKENS = 8  # the most tokens one draft proposes
NGRAMS = (4, 3, 2)  # the lengths of the suffix looked up, longest first


class PromptLookup:
    """N-gram drafts over one row's own tokens."""

    def __init__(self, k: int = DRAFT_TOKENS, ngrams: Sequence[int] = NGRAMS) -> None:
        self.k = max(1, k)
        self.ngrams = tuple(sorted(set(ngrams), reverse=True))
        self._seen: list[int] = []
        # n -> {n-gram: where the tokens after its latest occurrence (that has any) start}
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self.ngrams}

    def propose(self, tokens: Sequence[int], k: int | None = None) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier match of ``tokens``' suffix, or []."""
        k = self.k if k is None else k
        self._follow(tokens)
        if k <= 0:
            return []
        seen = self._seen
        for n in self.ngrams:
            start = self._index[n].get(tuple(seen[-n:])) if len(seen) > n else None
            if start is not None:
                return _continued(seen, start, k)
        return []

    def _follow(self, tokens: Sequence[int]) -> None:
        seen = self._seen
        known = len(seen)
        if len(tokens) < known or (known and tokens[known - 1] != seen[-1]):  # not a continuation
            self._seen, self._index = [], {n: {} for n in self.ngrams}
            seen, known = self._seen, 0
        for token in tokens[known:]:
            end = len(seen)  # the n-grams ending just before this token now have a continuation
            for n, index in self._index.items():
                if end >= n:
                    index[tuple(seen[end - n : end])] = end
            seen.append(int(token))


def _continued(seen: list[int], start: int, k: int) -> list[int]:
    """``k`` tokens from ``start`` on; where they run past the end, the text repeats with period
    ``len(seen) - start`` (the suffix matched the tokens before ``start``: a run or a short cycle)."""
    out = seen[start : start + k]
    period = len(seen) - start
    while len(out) < k:
        out.append(out[len(out) - period])
    return out
