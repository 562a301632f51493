"""Model names and the -fast CLI strip (reference §3, §10)."""

from __future__ import annotations

import pytest

from tinytitan.engine.errors import UnknownModel
from tinytitan.engine.request import ChatRequest, Message, Part, Tool, ToolCall
from tinytitan.engine.request.router import resolve_model, strip_cli


def test_names() -> None:
    assert resolve_model("m", "m") == ("m", False)
    assert resolve_model("m-fast", "m") == ("m", True)
    with pytest.raises(UnknownModel):
        resolve_model("claude-sonnet-4-5", "m")


def test_names_in_a_catalog() -> None:
    served = ["a", "b", "c-fast"]
    assert resolve_model("b", served) == ("b", False)
    assert resolve_model("b-fast", served) == ("b", True)
    assert resolve_model("c-fast", served) == ("c-fast", False)  # an id ending in -fast: exact match first
    assert resolve_model("c-fast-fast", served) == ("c-fast", True)
    with pytest.raises(UnknownModel) as err:
        resolve_model("claude-haiku-4-5", served)
    assert err.value.status == 404 and err.value.param == "model"
    assert err.value.message == (
        "requested model is not available: 'claude-haiku-4-5'; this server serves a, b, c-fast (each also as <id>-fast)"
    )


def test_strip_cli() -> None:
    request = ChatRequest(
        model="m",
        messages=(
            Message("system", "guidance"),
            Message("user", (Part("text", "<System-Reminder>x</System-Reminder>do it"),)),
            Message("assistant", None, tool_calls=(ToolCall("c1", "f", "{}"),)),
            Message("tool", "result", tool_call_id="c1"),
            Message("assistant", "done <system-reminder>y</system-reminder>"),
            Message("user", "<system-reminder>only</system-reminder>"),
        ),
        tools=(Tool("f"),),
    )
    out = strip_cli(request)
    assert out.tools == ()
    assert [m.role for m in out.messages] == ["user", "assistant", "user"]
    assert out.messages[0].content == (Part("text", "do it"),)
    assert out.messages[1].content == "done"
    assert out.messages[2].content == "<system-reminder>only</system-reminder>"  # would be empty: kept
