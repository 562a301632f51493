"""The triggered mask (issue 38): free writing until the model spells a custom tool's call head, then
that call held to its grammar token by token, then free again (or only an end token, in a syntax whose
call ends the answer)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tinytitan.engine.grammar.calls import FreeformInput, call_head, forced_call_grammar
from tinytitan.engine.grammar.freeform import compile_input
from tinytitan.engine.grammar.mask import lark_marker
from tinytitan.engine.grammar.trigger import TriggeredMask
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.testing.families import family_dir
from tinytitan.testing.freeform import PATCH, grammar


@pytest.fixture(scope="module")
def qwen3() -> Iterator[MlxBackend]:
    yield MlxBackend(str(family_dir("qwen3")))  # its tokenizer only: no weights, no MLX


def trigger(backend: MlxBackend, *, ends_answer: bool = False) -> TriggeredMask:
    lt, tw = backend.lltokenizer, backend.tokenizer
    regex = compile_input("lark", grammar("codex_apply_patch")).regex

    def marker(text: str) -> str:
        return lark_marker(lt, tw, text)

    call = forced_call_grammar("json_tools", [("apply_patch", FreeformInput(regex))], marker)
    return TriggeredMask(
        lt, [(call_head("json_tools", "apply_patch"), call)], tw.eos_token_ids, ends_answer=ends_answer
    )


def feed(mask: TriggeredMask, backend: MlxBackend, text: str) -> list[bool]:
    """Feed ``text``'s tokens as sampled; per token, whether the mask was holding the call when it came."""
    held = []
    for token in backend.tokenizer.encode(text, add_special_tokens=False):
        held.append(mask.active is not None)
        if mask.active is not None:
            allowed: Any = mask.active.allowed(mask.lltokenizer.vocab_size)
            assert allowed[token], f"the mask refuses {backend.tokenizer.decode([token])!r}"
        mask._sampled(token)
    return held


def call_text(name: str, text: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"input": text}}) + "\n</tool_call>"


def test_free_text_then_a_held_call_then_free_again(qwen3: MlxBackend) -> None:
    mask = trigger(qwen3)
    assert not any(feed(mask, qwen3, "Let me patch it. <b>x</b>\n"))  # free: nothing held, no matcher
    held = feed(mask, qwen3, call_text("apply_patch", PATCH))
    first = held.index(True)
    assert not any(held[:first]) and all(held[first:])  # held from just after the head to the end marker
    head = qwen3.tokenizer.encode(call_head("json_tools", "apply_patch"), add_special_tokens=False)
    assert first == len(head)
    assert mask.active is None and mask.calls == 1 and not mask.finishing
    assert not any(feed(mask, qwen3, "Done."))


def test_a_function_call_stays_free(qwen3: MlxBackend) -> None:
    mask = trigger(qwen3)
    assert not any(feed(mask, qwen3, call_text("apply", "x") + call_text("ls", "*** nothing")))
    assert mask.calls == 0


def test_the_mask_refuses_what_the_grammar_refuses(qwen3: MlxBackend) -> None:
    mask = trigger(qwen3)
    feed(mask, qwen3, '<tool_call>\n{"name": "apply_patch", "arguments": {"input": "*** Begin Patch\\n')
    assert mask.active is not None
    allowed = mask.active.allowed(mask.lltokenizer.vocab_size)
    ok = qwen3.tokenizer.encode("***", add_special_tokens=False)[0]
    bad = qwen3.tokenizer.encode("hello", add_special_tokens=False)[0]
    assert allowed[ok] and not allowed[bad]


def test_a_call_that_ends_the_answer_leaves_only_end_tokens(qwen3: MlxBackend, device: None) -> None:
    import mlx.core as mx

    mask = trigger(qwen3, ends_answer=True)
    vocab = mask.lltokenizer.vocab_size
    free = np.array(mask(mx.array([1]), mx.zeros((1, vocab))))[0]
    assert np.isfinite(free).all()  # writing freely: nothing masked
    feed(mask, qwen3, call_text("apply_patch", PATCH))
    assert mask.finishing and mask.active is None
    last = qwen3.tokenizer.encode("</tool_call>", add_special_tokens=False)[-1]
    out = np.array(mask(mx.array([last]), mx.zeros((1, vocab))))[0]
    assert set(np.flatnonzero(np.isfinite(out))) == set(mask.end_tokens) | {mask.lltokenizer.eos_token}
