"""The scripted backend: rule matching on ``stream`` and what a recorded request carries."""

from __future__ import annotations

import pytest

from tests.engine.models.support import run_batch
from tinytitan.engine.errors import GenerationFailed
from tinytitan.engine.models.stub import ScriptError, StubBackend, load_script
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, ToolChoice
from tinytitan.engine.request.validate import validate

RULES = [
    {"when": {"stream": True}, "reply": {"text": "streamed and broken", "fail_after_events": 1}},
    {"when": {"stream": False}, "reply": {"text": "answered whole"}},
]


def _run(backend: StubBackend, *, stream: bool, reasoning: ReasoningControls | None = None) -> str:
    chat = ChatRequest(
        model="stub-model", messages=(Message("user", "hi"),), stream=stream, reasoning=reasoning or ReasoningControls()
    )
    return run_batch(backend, validate(chat, backend.info))


def test_when_stream_matches_only_streaming_requests() -> None:
    backend = StubBackend(load_script({"rules": RULES}))
    assert _run(backend, stream=False) == "answered whole"
    with pytest.raises(GenerationFailed):
        _run(backend, stream=True)
    assert [r["stream"] for r in backend.recorded] == [False, True]


def test_when_stream_is_a_known_key() -> None:
    load_script({"rules": [{"when": {"stream": False}, "reply": {}}]})
    with pytest.raises(ScriptError, match="unknown keys: streaming"):
        load_script({"rules": [{"when": {"streaming": True}, "reply": {}}]})


def test_recorded_request_says_which_reasoning_controls_were_sent() -> None:
    backend = StubBackend(
        load_script(
            {
                "reasoning_levels": ["off", "low", "high"],
                "default_reasoning": "low",
                "rules": [{"reply": {"text": "ok"}}],
            }
        )
    )
    _run(backend, stream=False)
    _run(backend, stream=False, reasoning=ReasoningControls(effort="high"))
    first, second = backend.recorded
    assert (first["reasoning_requested"], first["reasoning_level"]) == ({}, "low")
    assert (second["reasoning_requested"], second["reasoning_level"]) == ({"effort": "high"}, "high")


@pytest.mark.parametrize(
    ("calls", "choice", "ok"),
    [
        ([{"name": "a", "arguments": {"x": 1}}], ToolChoice("required"), True),
        ([{"name": "b", "arguments": {}}], ToolChoice("function", "b"), True),
        ([], ToolChoice("required"), False),
        ([{"name": "a", "arguments": {"x": 1}}], ToolChoice("function", "b"), False),
        ([{"name": "a", "arguments": {"x": "no"}}], ToolChoice("required"), False),
    ],
)
def test_stub_checks_a_forced_call(calls: list, choice: ToolChoice, ok: bool) -> None:
    from tinytitan.engine.request import Tool

    backend = StubBackend(
        load_script({"forced_tool_calls": True, "rules": [{"reply": {"text": "", "tool_calls": calls}}]})
    )
    tools = (Tool("a", parameters={"type": "object", "properties": {"x": {"type": "integer"}}}), Tool("b"))
    req = validate(
        ChatRequest(model="m", messages=(Message("user", "hi"),), tools=tools, tool_choice=choice), backend.info
    )
    run = lambda: run_batch(backend, req, 100)  # noqa: E731
    if ok:
        assert run()
    else:
        with pytest.raises(GenerationFailed):
            run()


def test_when_last_tool_scripts_a_sequence_across_tool_rounds() -> None:
    from tinytitan.engine.events import ToolCall

    backend = StubBackend(
        load_script(
            {
                "rules": [
                    {"when": {"last_tool": "second"}, "reply": {"text": "done"}},
                    {"when": {"last_tool": "first"}, "reply": {"tool_calls": [{"name": "second"}]}},
                    {"reply": {"tool_calls": [{"name": "first"}]}},
                ]
            }
        )
    )

    def after(name: str | None) -> str:
        messages: tuple[Message, ...] = (Message("user", "go"),)
        if name is not None:
            call = ToolCall("c1", name, "{}")
            messages += (Message("assistant", "", tool_calls=(call,)), Message("tool", "ok", tool_call_id="c1"))
        request = validate(ChatRequest(model="m", messages=messages), backend.info)
        return run_batch(backend, request)

    assert '"name": "first"' in after(None)
    assert '"name": "second"' in after("first")
    assert after("second") == "done"
    assert '"name": "first"' in after("other")  # a tool result of another function matches neither
