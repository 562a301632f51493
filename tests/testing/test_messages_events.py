"""The strict Messages stream checker accepts the encoder's streams and refuses broken ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tinytitan.api.anthropic.encode import MessagesStream
from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall
from tinytitan.testing.events import as_sent
from tinytitan.testing.messages_events import check_messages_stream

Pairs = list[tuple[str, dict[str, Any]]]


def stream() -> Pairs:
    encoder = MessagesStream("m", request_id="req_1")
    frames = [*encoder.start(), encoder.keepalive()]
    for event in (ReasoningDelta("hm"), TextDelta("a"), ToolCall("call_1", "read", "{}"), Finished("tool_calls")):
        frames += encoder.feed(event)
    return [(frame.event or "", as_sent(frame.data)) for frame in frames]


def test_a_good_stream_passes() -> None:
    assert check_messages_stream(stream())[-1][0] == "message_stop"


def _wrong_name(events: Pairs) -> Pairs:
    return [("ping", events[0][1]), *events[1:]]


def _no_delta(events: Pairs) -> Pairs:
    return [e for e in events if e[0] != "message_delta"]


def _skipped_index(events: Pairs) -> Pairs:
    out = []
    for name, data in events:
        if "index" in data and data["index"] >= 1:
            data = {**data, "index": data["index"] + 1}
        out.append((name, data))
    return out


def _text_delta_in_thinking(events: Pairs) -> Pairs:
    out = list(events)
    n = next(i for i, (name, data) in enumerate(out) if data.get("delta", {}).get("type") == "thinking_delta")
    out[n] = (out[n][0], {**out[n][1], "delta": {"type": "text_delta", "text": "x"}})
    return out


def _error_in_the_middle(events: Pairs) -> Pairs:
    error = {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    return [*events[:3], ("error", error), *events[3:]]


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (_wrong_name, "sent as 'event: ping'"),
        (_no_delta, "without a message_delta"),
        (_skipped_index, "index 2, expected 1"),
        (_text_delta_in_thinking, "a text_delta in a thinking block"),
        (_error_in_the_middle, "does not end the stream"),
    ],
)
def test_a_broken_stream_is_named(breaks: Callable[[Pairs], Pairs], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_messages_stream(breaks(stream()))
