"""The validator's tool checks for custom (freeform) tools and the tool choices that name them (issue 38)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.grammar.freeform import InputGrammar
from tinytitan.engine.request import ChatRequest, Freeform, Message, ModelInfo, Tool, ToolCall, ToolChoice
from tinytitan.engine.request.validate import validate
from tinytitan.testing.freeform import PATCH, grammar

MODEL = ModelInfo("m", context_window=1000, forced_tool_calls=True, freeform_grammars=True)
PATCH_TOOL = Tool("apply_patch", type="custom", format=Freeform("grammar", "lark", grammar("codex_apply_patch")))
EXEC = Tool("exec", type="custom")
READ = Tool("read", parameters={"type": "object", "properties": {}})


def check(*tools: Tool, model: ModelInfo = MODEL, **fields: Any) -> Any:
    return validate(ChatRequest("m", (Message("user", "hi"),), tools=tools, **fields), model)


def refused(*tools: Tool, model: ModelInfo = MODEL, **fields: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        check(*tools, model=model, **fields)
    return info.value


def test_a_grammar_is_compiled_once_and_kept_on_the_tool() -> None:
    tools = check(PATCH_TOOL, EXEC, READ).tools
    assert isinstance(tools[0].format.compiled, InputGrammar) and tools[0].format.compiled.regex
    assert tools[1].format == Freeform() and tools[2] == READ


def test_a_model_without_grammars_takes_free_text_only() -> None:
    plain = replace(MODEL, freeform_grammars=False)
    error = refused(PATCH_TOOL, model=plain)
    assert (error.param, error.code) == ("tools[0].format", "unsupported_value")
    assert check(EXEC, model=plain).tools == (replace(EXEC, format=Freeform()),)


def test_a_custom_tool_can_be_forced_by_name_or_among_allowed_tools() -> None:
    named = check(PATCH_TOOL, READ, tool_choice=ToolChoice("function", "apply_patch"))
    assert (named.tool_choice, named.forced_tool) == ("function", "apply_patch")
    allowed = check(PATCH_TOOL, EXEC, READ, tool_choice=ToolChoice("required", allowed=("exec", "read")))
    assert [t.name for t in allowed.tools] == ["exec", "read"] and allowed.forced_tool is None
    auto = check(PATCH_TOOL, EXEC, tool_choice=ToolChoice("auto", allowed=("exec",)))
    assert [t.name for t in auto.tools] == ["exec"] and auto.tool_choice == "auto"
    error = refused(EXEC, tool_choice=ToolChoice("auto", param="tool_choice", allowed=("nope",)))
    assert error.param == "tool_choice.tools[0]"
    no_forcing = replace(MODEL, forced_tool_calls=False)
    assert refused(EXEC, model=no_forcing, tool_choice=ToolChoice("function", "exec")).code == "unsupported_value"


def test_a_custom_call_in_the_history_carries_free_text() -> None:
    call = ToolCall("c1", "apply_patch", PATCH, type="custom")
    messages = (
        Message("user", "hi"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "ok", tool_call_id="c1"),
    )
    turns = validate(ChatRequest("m", messages, tools=(PATCH_TOOL,)), MODEL).turns
    assert turns[1].tool_calls == (call,) and turns[2].name == "apply_patch"
    function = replace(call, type="function")
    with pytest.raises(InvalidRequest, match="JSON object"):
        validate(
            ChatRequest("m", (*messages[:1], Message("assistant", "", tool_calls=(function,)), messages[2])), MODEL
        )
