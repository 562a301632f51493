"""The test-side SSE helpers: the client's reader (tests/test_eventstream.py), read into test shapes."""

from __future__ import annotations

import pytest

from tinytitan.testing import sse


def test_data_keeps_done_as_it_came() -> None:
    body = ': ping\n\nevent: a\ndata: {"x":\ndata: 1}\n\ndata: [DONE]\n\n'
    assert sse.data(body) == ['{"x":\n1}', "[DONE]"]


def test_lines_as_an_iterable() -> None:
    assert sse.events(["event: ping", 'data: {"type": "ping"}', ""]) == [("ping", {"type": "ping"})]


@pytest.mark.parametrize("body", ['data: {"type": "x"}\n\n', "event: x\ndata: [1]\n\n"])
def test_events_insists_on_named_json_object_frames(body: str) -> None:
    with pytest.raises(AssertionError):
        sse.events(body)
