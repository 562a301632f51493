"""Prompt-lookup drafts: guess a row's next tokens from text it already holds.

``PromptLookup.propose(tokens)`` looks for the latest n tokens (n = 4, then 3, then 2) earlier in
``tokens`` (the row's prompt and what it generated so far) and proposes up to ``k`` tokens that
followed the most recent earlier occurrence. Coding agents re-emit text from their context (a file
rewritten with a change, a patch, a quoted block), so such guesses are often right; the verify pass
(``speculative.py``) checks them all in one forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DRAFT_TOKENS", "PromptLookup"]

DRAFT_TOKENS = 8  # the most tokens one draft proposes
NGRAMS = (4, 3, 2)  # the lengths of the suffix looked up, longest first
WINDOW = 8192  # look this far back at most (bounds the per-step cost on long contexts)


class PromptLookup:
    """N-gram drafts over a row's own tokens."""

    def __init__(self, k: int = DRAFT_TOKENS, ngrams: Sequence[int] = NGRAMS, window: int = WINDOW) -> None:
        self.k = max(1, k)
        self.ngrams = tuple(sorted(set(ngrams), reverse=True))
        self.window = window

    def propose(self, tokens: Sequence[int], k: int | None = None) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier match of ``tokens``' suffix, or []."""
        k = self.k if k is None else k
        if k <= 0:
            return []
        seq = list(tokens[-self.window :])
        size = len(seq)
        for n in self.ngrams:
            if size <= n:
                continue
            suffix = seq[-n:]
            last = suffix[-1]
            # latest earlier occurrence first: the nearest text is the likeliest to be re-emitted
            for end in range(size - 2, n - 2, -1):
                if seq[end] != last or seq[end - n + 1 : end + 1] != suffix:
                    continue
                follow = seq[end + 1 : end + 1 + k]
                if follow:
                    return follow
        return []
