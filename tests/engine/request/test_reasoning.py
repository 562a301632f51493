"""The reasoning ladder (reference §5): nearest level, aliases, precedence, the log line."""

from __future__ import annotations

import logging

import pytest

from tinytitan.engine.request import ReasoningControls
from tinytitan.engine.request.reasoning import normalize_level, requested_level, resolve_level

BINARY = ("off", "on")
EFFORT = ("off", "low", "medium", "xhigh")


@pytest.mark.parametrize(
    ("asked", "rendered", "applied"),
    [
        ("xhigh", BINARY, "on"),
        ("low", BINARY, "on"),
        ("off", BINARY, "off"),
        ("none", BINARY, "off"),
        ("on", EFFORT, "xhigh"),
        ("high", EFFORT, "medium"),  # tie between medium and xhigh goes to the cheaper
        ("minimal", EFFORT, "low"),
        ("max", EFFORT, "xhigh"),
        ("ultra", EFFORT, "xhigh"),
        ("extra-high", BINARY, "on"),
        ("off", ("on",), "off"),
        ("low", ("on",), "on"),
    ],
)
def test_nearest_level(asked: str, rendered: tuple[str, ...], applied: str) -> None:
    assert resolve_level(ReasoningControls(effort=asked), rendered, "on").level == applied


def test_substitution_is_logged_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tinytitan.reasoning"):
        result = resolve_level(ReasoningControls(effort="xhigh"), BINARY, "on", request_id="r1")
    assert result.level == "on"
    assert "request r1 reasoning: level 'xhigh' is not supported by this model; applied on" in caplog.text


def test_unrecognised_word_keeps_the_default(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tinytitan.reasoning"):
        result = resolve_level(ReasoningControls(effort="galaxy-brain"), BINARY, "off")
    assert result.level == "off"
    assert "galaxy-brain" in caplog.text


def test_precedence() -> None:
    both = ReasoningControls(effort="low", template_effort="high", enable_thinking=False)
    assert requested_level(both)[0] == "low"
    assert requested_level(ReasoningControls(template_effort="high", enable_thinking=False))[0] == "high"
    assert requested_level(ReasoningControls(enable_thinking=False))[0] == "off"
    assert resolve_level(ReasoningControls(enable_thinking=False), BINARY, "on").level == "off"


def test_no_switch_renders_only_its_default() -> None:
    assert resolve_level(ReasoningControls(effort="high"), (), "on").level is None


def test_structured_output_forces_off() -> None:
    result = resolve_level(ReasoningControls(effort="high"), BINARY, "on", force_off="structured output")
    assert result.level == "off" and result.note == "thinking is off for structured output"


def test_budget_tokens_accepted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tinytitan.reasoning"):
        resolve_level(ReasoningControls(budget_tokens=512), BINARY, "on")
    assert "reasoning_budget_tokens=512 accepted, not enforced" in caplog.text


def test_aliases() -> None:
    assert [normalize_level(w) for w in ("auto", "thinking", "true", "highest", "Extra High", "nope")] == [
        "on",
        "on",
        "on",
        "xhigh",
        "xhigh",
        None,
    ]
