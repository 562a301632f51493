"""The one client-side SSE reader reads a stream the way a client does (WHATWG event stream interpretation)."""

from __future__ import annotations

from collections.abc import Iterator

from tinytitan.eventstream import Frame, frames, read_frames


def test_comments_are_not_frames_and_data_lines_join() -> None:
    body = ': ping\n\nevent: a\ndata: {"x":\ndata: 1}\n\ndata: [DONE]\n\n'
    assert frames(body) == [Frame("a", '{"x":\n1}'), Frame(None, "[DONE]")]
    assert frames(body)[0].json() == {"x": 1}


def test_a_frame_without_its_blank_line_is_not_dispatched() -> None:
    assert frames("data: one\n\ndata: two\n") == [Frame(None, "one")]
    assert list(read_frames(["data: one", "", "data: two"])) == [Frame(None, "one")]


def test_any_line_end_and_the_optional_space() -> None:
    assert [f.data for f in frames(b"data:a\r\n\r\ndata: b\r\rdata:  c\n\n")] == ["a", "b", " c"]


def test_a_line_separator_inside_data_is_text() -> None:
    assert frames('data: "a\u2028b"\n\n') == [Frame(None, '"a\u2028b"')]


def test_id_retry_and_unknown_fields_carry_no_event_and_a_bare_data_line_is_empty_data() -> None:
    assert frames("id: 7\nretry: 10\nfoo: bar\n\ndata\n\nevent: x\n\n") == [Frame(None, "")]


def test_frames_come_as_their_blank_line_arrives() -> None:
    """A streaming client sees each event at once, not when the stream ends."""
    read: list[str] = []

    def lines() -> Iterator[str]:
        for line in ["event: a", "data: 1", "", "data: 2", ""]:
            read.append(line)
            yield line

    stream = read_frames(lines())
    assert next(stream) == Frame("a", "1") and read == ["event: a", "data: 1", ""]
    assert next(stream) == Frame(None, "2")
