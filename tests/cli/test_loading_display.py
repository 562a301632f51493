"""What ``serve`` shows while loading: plain lines off a terminal, a spinner line on one."""

from __future__ import annotations

import io

from tinytitan.cli.loading_display import LoadingDisplay


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    display = LoadingDisplay(out)
    display("converting a.gguf (94 MB)")
    display("loading weights")
    display.clear()
    display("a catalog switch, later: not shown")
    assert out.getvalue() == "TinyTitan: converting a.gguf (94 MB)…\nTinyTitan: loading weights…\n"


def test_one_line_rewritten_in_place_on_a_terminal() -> None:
    out = _Terminal()
    display = LoadingDisplay(out)
    display("converting a.gguf (94 MB)")
    display("loading weights")
    display.clear()
    shown = out.getvalue()
    assert "\n" not in shown  # every frame rewrites the same line
    assert "\r\033[K⠋ converting a.gguf (94 MB)…" in shown and "\r\033[K⠋ loading weights…" in shown
    assert shown.endswith("\r\033[K")  # erased before the banner
