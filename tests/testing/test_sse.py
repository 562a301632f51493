"""The test-side SSE reader reads a stream the way a client does."""

from __future__ import annotations

import pytest

from tinytitan.testing import sse


def test_comments_are_not_frames_and_data_lines_join() -> None:
    body = ': ping\n\nevent: a\ndata: {"x":\ndata: 1}\n\ndata: [DONE]\n\n'
    assert sse.frames(body) == [sse.Frame("a", '{"x":\n1}'), sse.Frame(None, "[DONE]")]
    assert sse.data(body) == ['{"x":\n1}', "[DONE]"]


def test_a_frame_without_its_blank_line_is_not_dispatched() -> None:
    assert sse.data("data: one\n\ndata: two\n") == ["one"]


def test_any_line_end_and_the_optional_space() -> None:
    assert sse.data("data:a\r\n\r\ndata: b\r\rdata:  c\n\n") == ["a", "b", " c"]


def test_a_line_separator_inside_data_is_text() -> None:
    assert sse.data('data: "a\u2028b"\n\n') == ['"a\u2028b"']


def test_lines_as_an_iterable() -> None:
    assert sse.events(["event: ping", 'data: {"type": "ping"}', ""]) == [("ping", {"type": "ping"})]


@pytest.mark.parametrize("body", ['data: {"type": "x"}\n\n', "event: x\ndata: [1]\n\n"])
def test_events_insists_on_named_json_object_frames(body: str) -> None:
    with pytest.raises(AssertionError):
        sse.events(body)
