"""The strict Responses stream checker accepts the encoder's streams and refuses broken ones."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tinytitan.api.responses.encode import OutputBuilder, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.engine.events import Finished, TextDelta, ToolCall
from tinytitan.engine.request import Sampling
from tinytitan.testing.events import as_sent
from tinytitan.testing.responses_events import check_stream


def stream() -> list[dict[str, Any]]:
    shell = response_shell(ResponsesRequest(model="m"), model="m", sampling=Sampling(), store=False)
    builder = OutputBuilder(shell)
    events = [*builder.start(), builder.keepalive()]
    for event in (TextDelta("a"), ToolCall("call_1", "read", "{}"), Finished("tool_calls")):
        events += builder.feed(event)
    return [as_sent(event) for event in events]  # each event as a client reads it


def test_a_good_stream_passes() -> None:
    final = check_stream(stream())
    assert [item["type"] for item in final["output"]] == ["message", "function_call"]


def _renumbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _gap(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return events[:3] + events[4:]


def _ping_after_end(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _renumbered([*events, events[1]])


def _bad_field(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    broken = copy.deepcopy(events)
    delta = next(e for e in broken if e["type"] == "response.output_text.delta")
    delta["delta"] = 7
    return broken


def _delta_for_a_closed_item(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    delta = next(e for e in events if e["type"] == "response.output_text.delta")
    return _renumbered([*events[:-1], delta, events[-1]])


def _output_differs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    broken = copy.deepcopy(events)
    broken[-1]["response"]["output"].pop()
    return broken


@pytest.mark.parametrize("breakage", [_gap, _ping_after_end, _bad_field, _delta_for_a_closed_item, _output_differs])
def test_a_broken_stream_fails(breakage: Any) -> None:
    with pytest.raises(AssertionError):
        check_stream(breakage(stream()))
