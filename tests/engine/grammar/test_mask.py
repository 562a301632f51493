"""The llguidance mask for the mlx backend (issue #6): numpy bitmask → mx.where, padding rows, EOS at the end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinytitan.engine.grammar.mask import GrammarMask, lark_marker
from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, compile_schema
from tinytitan.engine.models.mlx import MlxBackend


@pytest.fixture(scope="module")
def backend(tiny_dir: Path) -> MlxBackend:
    return MlxBackend(str(tiny_dir))


def test_the_json_call_family_can_force_calls(backend: MlxBackend) -> None:
    assert backend.info.forced_tool_calls is True
    assert lark_marker(backend.lltokenizer, backend.tokenizer, "<tool_call>") == "<[151657]>"
    assert lark_marker(backend.lltokenizer, backend.tokenizer, "plain") == '"plain"'


@pytest.mark.usefixtures("device")  # the test applies the mask itself, as the device worker does
def test_mask_follows_the_grammar_and_pads_the_vocabulary(backend: MlxBackend) -> None:
    import mlx.core as mx

    llt, eos = backend.lltokenizer, backend.tokenizer.eos_token_ids
    mask = GrammarMask(llt, compile_schema(JSON_OBJECT_SCHEMA, "x"), eos)
    vocab = 151936  # the model's logits rows: more than the tokenizer's
    assert vocab > llt.vocab_size
    logits = mx.zeros((1, vocab))
    out = np.array(mask(mx.array([1]), logits))[0]
    allowed = np.flatnonzero(np.isfinite(out))
    assert allowed.size > 0 and all(llt.decode_str([int(t)]).lstrip().startswith("{") for t in allowed)
    assert not np.isfinite(out[llt.vocab_size :]).any()
    for token in llt.tokenize_str('{"a": 1}'):
        mask.consume(token)
    assert mask.done
    ended = np.flatnonzero(mask.allowed(vocab))
    assert set(ended.tolist()) <= set(eos) | {llt.eos_token} and ended.size > 0


@pytest.mark.usefixtures("device")  # the test applies the mask itself, as the device worker does
def test_the_processor_consumes_what_was_sampled(backend: MlxBackend) -> None:
    import mlx.core as mx

    llt = backend.lltokenizer
    mask = GrammarMask(llt, compile_schema({"enum": ["yes"]}, "x"), backend.tokenizer.eos_token_ids)
    seen = [7]
    for token in llt.tokenize_str('"yes"'):
        mask(mx.array(seen), mx.zeros((1, 151936)))
        seen.append(token)
    mask(mx.array(seen), mx.zeros((1, 151936)))
    assert mask.done
