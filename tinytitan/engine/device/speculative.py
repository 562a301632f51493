"""Speculative decoding with prompt-lookup drafts, and a draft model's, on mlx-lm's ``GenerationBatch``
(read and moved on through ``mlx_lm_adapter.DecodingRows``: no private attribute of mlx-lm here).

Policy: a step drafts only when nothing waits to prefill and no decoding row has a grammar mask. A
lone row drafts as below. Several rows draft together only when every row's lookup guessed its
pending token: one pass verifies k drafts for each, and every row keeps as many as the row that
accepted fewest (mlx-lm's batch cache trims all rows alike; the others' extra accepted drafts are
proposed again next step); otherwise the step is mlx-lm's own one-token step. The pending token ``y``
(chosen last step, still being computed) is not waited for unless the lookup over the text before
it (``drafts.PromptLookup``) finds a match whose next token could be ``y``; only when it is does the
step draft the tokens after it, ``d1..dk``, so free-form text, where matches rarely hold, keeps
mlx-lm's overlap of one step's computing with the next one's setting up. With a draft model
(``draft_model.ModelDrafts``) a step the lookup cannot draft waits for ``y`` and lets the draft
model guess ``d1..dk`` greedily after it — once that model holds the row's context (it takes the
prompt in a chunk per step first).

One forward pass feeds ``y`` and the drafts; the row's logits processors (penalties) run per
position in order, each seeing exactly the tokens plain decoding would have shown it; the row's
sampler draws at each position the token plain decoding would have drawn there (greedy: the
argmax; sampled: with the key plain decoding's step would use, see ``_draw``). The longest prefix
of drafts equal to those draws is accepted, plus the draw after it (the new pending token); the KV
cache positions of the rejected drafts are trimmed and the sampler's key rewound to after the draws
used. The step emits ``y, d1..da`` — one response per token, each counted against the cap and
checked for the end token in order, exactly like one-token steps — so output is token-for-token
that of plain decoding, greedy or seeded (up to float rounding between a k+1-token and a 1-token
forward pass on a near tie). The draft length adapts per row: it starts at ``START_K``, doubles (up
to ``DRAFT_TOKENS``) while every draft is accepted and drops to one more than the accepted count
otherwise, so text where drafts keep missing pays for verifying about two tokens, not eight.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinytitan.engine.device.draft_model import ModelDrafts
from tinytitan.engine.device.drafts import DRAFT_TOKENS, PromptLookup
from tinytitan.engine.device.sampling import Sampler
from tinytitan.engine.mlx_lm_adapter import DecodingRows

__all__ = ["START_K", "Speculator"]

START_K = 4  # a row's first draft length (adaptive: a verify pass of many rejected drafts costs more)


class Speculator:
    """Runs draft-and-verify steps on a ``BatchGenerator`` whose rows may draft."""

    def __init__(self, model: ModelDrafts | None = None) -> None:
        self.model = model  # the draft model's drafts where the lookup has none (``--draft-model``)
        self.lookup = True  # False: the draft model's drafts alone (tests, benchmarks)
        self.proposed = 0  # draft tokens verified (tests, benchmarks)
        self.accepted = 0  # … of which were emitted
        self.from_model = 0  # … of the proposed, how many the draft model made
        self.together = 0  # verify passes of several rows at once (tests, benchmarks)
        self._rows: dict[int, _Row] = {}  # by uid: the rows of the generation batch

    def step(self, gen: Any, draftable: Callable[[int], bool]) -> list[Any] | None:
        """One draft-and-verify step, or None when this step should be mlx-lm's own."""
        if self.model is not None:
            self.model.pace.begin()
        responses, kind = self._step(gen, draftable)
        if self.model is not None:
            self.model.pace.end(kind, 1 if responses is None else len(responses))
        return responses

    def _step(self, gen: Any, draftable: Callable[[int], bool]) -> tuple[list[Any] | None, str | None]:
        """The step's responses (None: mlx-lm's own step) and what it was for a lone row: "plain",
        "lookup" or "model" drafts, "catch-up" (plain, and the draft model took in a chunk), or None
        (no lone decoding row)."""
        rows = DecodingRows.of(gen)
        if rows is None:
            return None, None
        self._rows = {uid: self._rows.get(uid) or _Row() for uid in rows.uids}
        if len(rows.uids) > 1:
            return self._step_together(gen, rows, draftable), None
        uid = rows.uids[0]
        sampler = rows.samplers[0] if rows.samplers else None
        room = rows.room(0)  # tokens after y still allowed
        if not draftable(uid) or not isinstance(sampler, Sampler) or room <= 0:
            return None, "plain"
        k = min(room, self._rows[uid].k)
        tokens = rows.tokens[0]
        # what followed the latest match of the text before y: its first token guesses y, so a step
        # whose lookup finds nothing, or guessed y wrong, is mlx-lm's own without waiting for y
        ahead = self._rows[uid].lookup.propose(tokens, 1 + k) if self.lookup else []
        model = self.model if self.model is not None and self.model.pace.pays() else None
        if len(ahead) < 2 and (model is None or model.behind(uid, tokens)):
            return None, "plain" if model is None else "catch-up"
        import mlx.core as mx

        with mx.stream(gen.stream):
            (y,) = rows.pending()
            if len(ahead) >= 2 and y == ahead[0]:
                return self._verify(rows, [y], [ahead[1:]]), "lookup"
            if model is None or model.behind(uid, tokens):
                return None, "plain" if model is None else "catch-up"
            draft = model.propose(uid, tokens, y, k)
            self.from_model += len(draft)
            return self._verify(rows, [y], [draft]), "model"

    def _step_together(self, gen: Any, rows: DecodingRows, draftable: Callable[[int], bool]) -> list[Any] | None:
        """Several rows draft together only when every one may and every lookup guessed its row's
        pending token: one pass verifies k drafts per row and every row keeps the accepted count of
        the row that accepted fewest (mlx-lm's batch cache trims all rows alike)."""
        uids = rows.uids
        if not self.lookup or not all(draftable(uid) for uid in uids):
            return None
        if not rows.samplers or not all(isinstance(s, Sampler) for s in rows.samplers):
            return None
        k = min(min(rows.room(i) for i in range(len(uids))), *(self._rows[uid].k for uid in uids))
        if k <= 0:
            return None
        aheads = [self._rows[uid].lookup.propose(tokens, 1 + k) for uid, tokens in zip(uids, rows.tokens, strict=True)]
        if any(len(ahead) < 1 + k for ahead in aheads):
            return None
        import mlx.core as mx

        with mx.stream(gen.stream):
            ys = rows.pending()
            if any(y != ahead[0] for y, ahead in zip(ys, aheads, strict=True)):
                return None
            self.together += 1
            return self._verify(rows, ys, [ahead[1:] for ahead in aheads])

    def _verify(self, rows: DecodingRows, ys: list[int], drafts: list[list[int]]) -> list[Any]:
        """Verify ``drafts`` (``k`` for each row, after its pending token ``ys[i]``) in one pass."""
        import mlx.core as mx

        k = len(drafts[0])
        inputs = mx.array([[y, *draft] for y, draft in zip(ys, drafts, strict=True)], dtype=mx.uint32)
        logits = rows.model(inputs, cache=rows.cache)  # (rows, k + 1, vocab)
        logprobs, choices, keys, accepted = [], [], [], []
        for i, (y, draft) in enumerate(zip(ys, drafts, strict=True)):
            row = _processed(rows, i, y, draft, logits[i])
            row = row - mx.logsumexp(row, axis=-1, keepdims=True)
            chosen, row_keys = _draw(rows.samplers[i], row)
            picked: list[int] = chosen.tolist()
            a = 0
            while a < k and draft[a] == picked[a]:
                a += 1
            logprobs.append(row)
            choices.append(chosen)
            keys.append(row_keys)
            accepted.append(a)
            self._rows[rows.uids[i]].adapt(k, a)
        a = min(accepted)  # what every row keeps: the cache is trimmed alike for all
        self.proposed += k * len(ys)
        self.accepted += a * len(ys)
        _trim(rows.cache, k - a)  # the cache holds y and all k drafts: keep y and the accepted
        emitted, chosen_by = [], []
        for i, (y, draft) in enumerate(zip(ys, drafts, strict=True)):
            if keys[i]:  # the draws of the positions not kept never happened
                rows.samplers[i].key = keys[i][a]
            if rows.processors and rows.processors[i] and a:
                rows.context(i, mx.array(draft[:a], dtype=mx.int32))
            emitted.append([y, *draft[:a]])
            # the distribution each emitted token came from
            chosen_by.append([rows.pending_logprobs(i), *(logprobs[i][j] for j in range(a))])
        rows.set_pending(mx.concatenate([chosen[a : a + 1] for chosen in choices]), [row[a] for row in logprobs])
        return _respond(rows, emitted, chosen_by)


class _Row:
    """A row's n-gram index and its adaptive draft length."""

    def __init__(self) -> None:
        self.lookup = PromptLookup()
        self.k = min(START_K, DRAFT_TOKENS)  # doubles while every draft is accepted, else accepted + 1

    def adapt(self, k: int, accepted: int) -> None:
        self.k = min(DRAFT_TOKENS, 2 * k) if accepted == k else accepted + 1


def _processed(rows: DecodingRows, i: int, y: int, draft: list[int], logits: Any) -> Any:
    """Row ``i``'s logits at each position after its processors (penalties, run per position in
    order, each seeing the tokens plain decoding would have shown it)."""
    import mlx.core as mx

    processors = rows.processors[i] if rows.processors else None
    if not processors:
        return logits
    base = rows.context(i, mx.array([y], dtype=mx.int32))
    out = []
    for j in range(len(draft) + 1):
        context = base if j == 0 else mx.concatenate([base, mx.array(draft[:j], dtype=mx.int32)])
        row = logits[j : j + 1]
        for processor in processors:
            row = processor(context, row)
        out.append(row)
    return mx.concatenate(out, axis=0)


def _respond(rows: DecodingRows, emitted: list[list[int]], logprobs: list[list[Any]]) -> list[Any]:
    """One response per emitted token, ending a row at its cap or end token like plain steps (its
    cache then holds what it emitted, no more); rows that ended leave the batch."""
    responses, keep = [], []
    for i in range(len(rows.uids)):
        for j, token in enumerate(emitted[i]):
            response = rows.emit(i, token, logprobs[i][j])
            responses.append(response)
            if response.finish_reason is not None:
                _trim(response.prompt_cache, len(emitted[i]) - 1 - j)
                break
        else:
            keep.append(i)
    rows.keep(keep)
    return responses


def _draw(sampler: Sampler, logprobs: Any) -> tuple[Any, list[Any]]:
    """The sampler's token at each position, drawn as plain decoding would draw it there, and the
    sampler's key after each draw (none for greedy). A sampled row splits its key once per token,
    so position j gets the key plain decoding's j-th step would use: a seeded row draws the same
    tokens with drafts or without, and the rule "accept a draft while it equals the draw" is the
    speculative acceptance rule for a draft that is one token for sure (accepted with the token's
    probability; on a miss the draw is a sample of the rest)."""
    import mlx.core as mx

    if sampler.temperature <= 0.0:
        return mx.argmax(logprobs, axis=-1), []
    picks, keys = [], []
    for j in range(logprobs.shape[0]):
        picks.append(sampler(logprobs[j : j + 1]))
        keys.append(sampler.key)
    return mx.concatenate(picks, axis=0), keys


def _trim(cache: list[Any], n: int) -> None:
    if n > 0:
        for layer in cache:
            layer.trim(n)
