"""The grammar a request needs from a model family (``models/grammar.py``): forced calls and their refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.models.base import Prompt
from tinytitan.engine.models.grammar import check_forced, grammar_for
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, Message, ModelInfo, Sampling, Tool, ToolChoice
from tinytitan.engine.request.validate import validate


@pytest.fixture(scope="module")
def backend(tiny_dir: Path) -> MlxBackend:
    return MlxBackend(str(tiny_dir))


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
