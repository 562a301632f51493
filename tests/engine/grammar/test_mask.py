"""The llguidance mask for the mlx backend (issue #6): numpy bitmask → mx.where, padding rows, EOS at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tinytitan.engine.grammar.mask import GrammarMask, check_forced, grammar_for, lark_marker
from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, compile_schema
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, Message, ModelInfo, Sampling, Tool, ToolChoice
from tinytitan.engine.request.validate import validate


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


def _validated(backend: MlxBackend, **fields: Any) -> Any:
    req = ChatRequest(model="m", messages=(Message("user", "hi"),), sampling=Sampling(), **fields)
    return validate(req, backend.info)


def test_forced_grammar_names_only_the_forced_tool(backend: MlxBackend) -> None:
    tools = (Tool("a", parameters={"type": "object", "properties": {"x": {"enum": [1]}}, "required": ["x"]}), Tool("b"))
    request = _validated(backend, tools=tools, tool_choice=ToolChoice("function", "b"))
    assert request.forced_tool == "b" and request.reasoning_level == "off"
    grammar = grammar_for(request, Prompt("", 0), backend.lltokenizer, backend.tokenizer)
    assert grammar is not None
    llt = backend.lltokenizer
    import llguidance

    ok = llguidance.LLMatcher(llt, grammar)
    assert ok.consume_tokens(llt.tokenize_str('<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'))
    wrong = llguidance.LLMatcher(llt, grammar)
    assert not wrong.consume_tokens(llt.tokenize_str('<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'))


def test_a_forced_tool_schema_is_refused_by_keyword() -> None:
    from tinytitan.engine.errors import InvalidRequest

    info = ModelInfo(id="m", context_window=1000, forced_tool_calls=True)
    tool = Tool("a", parameters={"type": "object", "properties": {"s": {"type": "array", "uniqueItems": True}}})
    req = ChatRequest(model="m", messages=(Message("user", "hi"),), tools=(tool,), tool_choice=ToolChoice("required"))
    with pytest.raises(InvalidRequest) as err:
        validate(req, info)
    assert err.value.param == "tools[0].function.parameters" and "'uniqueItems'" in err.value.message
    auto = ChatRequest(model="m", messages=(Message("user", "hi"),), tools=(tool,))
    assert validate(auto, info).tool_choice == "auto"  # not forced: the schema is only rendered


def test_a_forced_call_the_familys_syntax_cannot_promise_is_refused_naming_the_tool(backend: MlxBackend) -> None:
    from tinytitan.engine.errors import InvalidRequest

    inner = {"type": "object", "properties": {"x": {"type": "string"}}}
    nested = {"type": "object", "properties": {"opts": inner}, "required": ["opts"]}
    flat = {"type": "object", "properties": {"x": {"type": "string"}}}
    tools = (Tool("plain", parameters=flat), Tool("deep", parameters=nested))
    request = _validated(backend, tools=tools, tool_choice=ToolChoice("required"))
    check_forced("json_tools", request)  # JSON calls can carry nested arguments
    with pytest.raises(InvalidRequest) as err:
        check_forced("gemma4", request)  # Gemma's call notation cannot
    assert err.value.param == "tools[1].function.parameters"
    assert err.value.code == "unsupported_value" and "deep.properties.opts" in err.value.message
    only_plain = _validated(backend, tools=tools, tool_choice=ToolChoice("function", "plain"))
    check_forced("gemma4", only_plain)  # the forced tool alone is checked
