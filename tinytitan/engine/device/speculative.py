"""Speculative decoding with prompt-lookup drafts, and a draft model's, on mlx-lm's ``GenerationBatch``.

Policy: a step drafts only when the batch holds one decoding row, nothing waits to prefill and the
row has no grammar mask; every other step is mlx-lm's own one-token step. The pending token ``y``
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

__all__ = ["START_K", "Speculator"]

START_K = 4  # a row's first draft length (adaptive: a verify pass of many rejected drafts costs more)


class Speculator:
    """Runs draft-and-verify steps on a ``BatchGenerator`` whose lone row may draft."""

    def __init__(self, model: ModelDrafts | None = None) -> None:
        self.drafts = PromptLookup()  # the lone row's n-gram index (a new one for each row)
        self.model = model  # the draft model's drafts where the lookup has none (``--draft-model``)
        self.lookup = True  # False: the draft model's drafts alone (tests, benchmarks)
        self.proposed = 0  # draft tokens verified (tests, benchmarks)
        self.accepted = 0  # … of which the model agreed with
        self.from_model = 0  # … of the proposed, how many the draft model made
        self._uid = -1  # the row the adaptive draft length belongs to
        self._k = START_K  # its next draft length: doubles while all are accepted, else accepted + 1

    def step(self, gen: Any, draftable: Callable[[int], bool]) -> list[Any] | None:
        """One draft-and-verify step, or None when this step should be mlx-lm's own."""
        if self.model is not None:
            self.model.pace.begin()
        responses, kind = self._step(gen, draftable)
        if self.model is not None:
            self.model.pace.end(kind, 1 if responses is None else len(responses))
        return responses

    def _step(self, gen: Any, draftable: Callable[[int], bool]) -> tuple[list[Any] | None, str | None]:
        """The step's responses (None: mlx-lm's own step) and what it was for the lone row: "plain",
        "lookup" or "model" drafts, "catch-up" (plain, and the draft model took in a chunk), or None
        (no lone decoding row)."""
        batch = gen._generation_batch
        if len(batch) != 1 or len(gen._prompt_batch) or gen._unprocessed_sequences:
            return None, None
        uid = batch.uids[0]
        sampler = batch.samplers[0] if batch.samplers else None
        room = batch.max_tokens[0] - batch._num_tokens[0] - 1  # tokens after y still allowed
        if not draftable(uid) or not isinstance(sampler, Sampler) or room <= 0:
            return None, "plain"
        if uid != self._uid:
            self._uid, self._k = uid, min(START_K, DRAFT_TOKENS)
            self.drafts = PromptLookup()
        k = min(room, self._k)
        tokens = batch.tokens[0]
        # what followed the latest match of the text before y: its first token guesses y, so a step
        # whose lookup finds nothing, or guessed y wrong, is mlx-lm's own without waiting for y
        ahead = self.drafts.propose(tokens, 1 + k) if self.lookup else []
        model = self.model if self.model is not None and self.model.pace.pays() else None
        if len(ahead) < 2 and (model is None or model.behind(uid, tokens)):
            return None, "plain" if model is None else "catch-up"
        import mlx.core as mx

        with mx.stream(gen._stream):
            y = int(batch._next_tokens.item())
            if len(ahead) >= 2 and y == ahead[0]:
                return self._verify(batch, sampler, y, ahead[1:]), "lookup"
            if model is None or model.behind(uid, tokens):
                return None, "plain" if model is None else "catch-up"
            draft = model.propose(uid, tokens, y, k)
            self.from_model += len(draft)
            return self._verify(batch, sampler, y, draft), "model"

    def _verify(self, batch: Any, sampler: Sampler, y: int, draft: list[int]) -> list[Any]:
        import mlx.core as mx

        k = len(draft)
        inputs = mx.array([[y, *draft]], dtype=mx.uint32)
        logits = batch.model(inputs, cache=batch.prompt_cache)[0]  # (k + 1, vocab)
        processors = batch.logits_processors[0] if batch.logits_processors else None
        if processors:
            base = batch._token_context[0].update_and_fetch(mx.array([y], dtype=mx.int32))
            rows = []
            for j in range(k + 1):
                context = base if j == 0 else mx.concatenate([base, mx.array(draft[:j], dtype=mx.int32)])
                row = logits[j : j + 1]
                for processor in processors:
                    row = processor(context, row)
                rows.append(row)
            logits = mx.concatenate(rows, axis=0)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        choices, keys = _draw(sampler, logprobs)
        picked: list[int] = choices.tolist()
        a = 0
        while a < k and draft[a] == picked[a]:
            a += 1
        self.proposed += k
        self.accepted += a
        self._k = min(DRAFT_TOKENS, 2 * k) if a == k else a + 1
        if keys:  # the draws of the rejected positions never happened
            sampler.key = keys[a]
        emitted = [y, *draft[:a]]
        # the cache now holds y and all k drafts: keep y and the accepted ones
        _trim(batch.prompt_cache, k - a)
        if processors and a:
            batch._token_context[0].update_and_fetch(mx.array(draft[:a], dtype=mx.int32))
        batch._next_tokens = choices[a : a + 1]
        chosen_by = [batch._next_logprobs[0], *(logprobs[i] for i in range(a))]  # the distribution each came from
        batch._next_logprobs = [logprobs[a]]
        return self._respond(batch, emitted, chosen_by)

    def _respond(self, batch: Any, emitted: list[int], logprobs: list[Any]) -> list[Any]:
        """One response per emitted token, ending the row at its cap or end token like plain steps."""
        responses = []
        uid = batch.uids[0]
        for i, token in enumerate(emitted):
            batch.tokens[0].append(token)
            batch._num_tokens[0] += 1
            finish = "length" if batch._num_tokens[0] >= batch.max_tokens[0] else None
            if batch._matchers[0].advance(token):
                finish = "stop"
            if finish is None:
                responses.append(batch.Response(uid, token, logprobs[i], None, None, None))
                continue
            _trim(batch.prompt_cache, len(emitted) - 1 - i)  # the cache holds what was emitted, no more
            responses.append(batch.Response(uid, token, logprobs[i], finish, batch.extract_cache(0), batch.tokens[0]))
            batch.filter([])
            break
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
