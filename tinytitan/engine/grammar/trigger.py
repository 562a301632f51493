"""A call the model chooses, held to its tool's grammar from the moment it names the tool (issue 38).

With ``tool_choice`` ``auto`` the model writes freely — text, thoughts, function calls: nothing is
masked and nothing costs a mask. ``TriggeredMask`` watches what it samples; once the tokens since some
token boundary spell the head of a call of a custom tool that has a grammar (``calls.call_head``: the
family's call marker and the tool's name), an ``llguidance.LLMatcher`` of that tool's whole call
(``calls.forced_call_grammar``) is started, fed those tokens, and masks every token after them until
the call is complete. Then writing is free again — or, in a syntax whose call ends only with the
answer (``ends_answer``: Mistral, harmony), only an end-of-turn token may follow.

A head spelled from a token that starts before it (text glued to the marker), or tokens past the head
that the call grammar refuses, leave the call unconstrained; the output parser still holds its input
to the grammar, so such a call reaches the client only if it parses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tinytitan.engine.grammar.mask import GrammarMask

__all__ = ["TriggeredMask"]


class TriggeredMask:
    """A logits processor: free writing, and each chosen call of a custom tool held to its grammar."""

    def __init__(
        self,
        lltokenizer: Any,
        calls: Sequence[tuple[str, str]],
        end_tokens: Iterable[int],
        *,
        ends_answer: bool = False,
    ) -> None:
        """``calls``: (head text, compiled call grammar) per custom tool with a grammar."""
        self.lltokenizer = lltokenizer
        self.heads = [(head.encode("utf-8"), grammar) for head, grammar in calls]
        self.end_tokens = list(end_tokens)
        self.ends_answer = ends_answer
        self.generated: list[int] = []
        self.candidates: list[int] = []  # indices in ``generated`` a head may start at
        self.active: GrammarMask | None = None
        self.finishing = False  # a call that ends the answer is done: only an end token may follow
        self._started = False
        self.calls = 0  # constrained calls so far (tests and benchmarks read it)
        self.mask_seconds: list[float] = []

    # -- watching --------------------------------------------------------------------------------
    def _bytes(self, start: int) -> bytes:
        return bytes(self.lltokenizer.decode_bytes(self.generated[start:]))

    def _watch(self) -> None:
        """After a free token: start a call's grammar when a head is spelled from a token boundary."""
        self.candidates.append(len(self.generated) - 1)
        kept: list[int] = []
        for start in self.candidates:
            text = self._bytes(start)
            for head, grammar in self.heads:
                if text.startswith(head) and self._start(start, grammar):
                    self.candidates = []
                    return
            if any(head.startswith(text) for head, _ in self.heads):
                kept.append(start)
        self.candidates = kept

    def _start(self, start: int, grammar: str) -> bool:
        """Start the call's matcher on the tokens since ``start``; False when they do not fit it."""
        mask = GrammarMask(self.lltokenizer, grammar, self.end_tokens)
        for token in self.generated[start:]:
            if not mask.matcher.consume_token(token):
                return False
        self.active = mask
        self.calls += 1
        return True

    # -- the processor ---------------------------------------------------------------------------
    def __call__(self, tokens: Any, logits: Any) -> Any:
        import mlx.core as mx

        if self._started:
            self._sampled(int(tokens[-1].item()))
        self._started = True
        if self.active is None and not self.finishing:
            return logits
        began = time.perf_counter()
        if self.active is not None:
            allowed = self.active.allowed(logits.shape[-1])
        else:
            allowed = np.zeros(logits.shape[-1], dtype=bool)
            ends = [t for t in (*self.end_tokens, self.lltokenizer.eos_token) if t < logits.shape[-1]]
            allowed[ends] = True
        mask = mx.array(allowed)
        self.mask_seconds.append(time.perf_counter() - began)
        return mx.where(mask, logits, mx.array(-mx.inf, dtype=logits.dtype))

    def _sampled(self, token: int) -> None:
        if self.active is None:
            if not self.finishing:
                self.generated.append(token)
                self._watch()
            return
        self.active.consume(token)
        if self.active.done:
            self.active = None
            self.generated, self.candidates = [], []
            self.finishing = self.ends_answer
