"""How a turn looks: the folded thought, Markdown once complete, the usage line, plain pipe output."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tinytitan.chat.render import PlainView, RichView, _tail, fold_thought, usage_line

RESPONSE = {
    "status": "completed",
    "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 96}, "output_tokens": 11},
}


def test_fold_thought_is_one_line() -> None:
    assert fold_thought("I should\nthink   about it") == "thought (5 words): I should think about it"
    folded = fold_thought("word " * 50, width=40)
    assert len(folded) == 40 and folded.endswith("…") and folded.startswith("thought (50 words): word")


def test_usage_line() -> None:
    assert usage_line(RESPONSE, 2.0, 0.5) == "11 tokens · 5.0 tok/s · prompt 120 (96 cached) · first token 0.5 s"
    cut = {"status": "incomplete", "usage": {"input_tokens": 3, "output_tokens": 1}}
    assert usage_line(cut, None, None) == "1 tokens · prompt 3 · cut at the output cap"


def test_tail_keeps_the_end_that_fits() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    assert _tail(text, 80, 3) == "line 97\nline 98\nline 99"
    assert _tail("x" * 250, 100, 2) == "x" * 200  # a long line wraps: only its end fits
    assert _tail("short", 80, 5) == "short"


def test_rich_view_prints_markdown_with_the_thought_folded() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    with RichView(console) as view:
        view.thought("Plan: add two numbers.")
        for chunk in ("Here:\n\n```python\n", "def add(a, b):\n", "    return a + b\n```\n"):
            view.text(chunk)
        view.tool_call("read_file", '{"path": "x"}')
        view.finish(RESPONSE)
    text = out.getvalue()
    assert text.count("thought (4 words): Plan: add two numbers.") == 1
    assert "def add(a, b):" in text and "```" not in text
    assert '⚙ read_file {"path": "x"}' in text
    assert text.rstrip().splitlines()[-1].startswith("11 tokens · ")


@pytest.mark.parametrize("ending", ["interrupted", "failed"])
def test_rich_view_endings(ending: str) -> None:
    out = io.StringIO()
    with RichView(Console(file=out, width=60, color_system=None)) as view:
        view.text("partial answer")
        if ending == "interrupted":
            view.interrupted()
        else:
            view.failed("the server went away")
    text = out.getvalue()
    if ending == "interrupted":
        assert "partial answer" in text and "stopped (the conversation is kept)" in text
    else:
        # what was shown stays above the one red line (a server shut down mid-answer)
        assert [line.strip() for line in text.strip().splitlines()[-2:]] == [
            "partial answer",
            "error: the server went away",
        ]


def test_plain_view_prints_only_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    view = PlainView()
    view.thought("hidden")
    view.text("hello ")
    view.text("world")
    view.finish(RESPONSE)
    view.failed("later trouble")
    captured = capsys.readouterr()
    assert captured.out == "hello world\n" and captured.err == "error: later trouble\n"
