"""How a turn looks: live while it streams, Markdown once complete (terminal), or plain text (pipe).

``RichView`` keeps the streaming text in a transient live region cropped to the screen (a spinner
while the model has not started, dimmed thoughts, then the answer's tail); when the answer is
complete the region is cleared and the answer is printed to the scrollback as Markdown, with the
thoughts folded into one dim line and a usage line under it. ``PlainView`` prints the answer text
only, as it arrives, for ``echo hi | tinytitan chat``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from contextlib import AbstractContextManager
from typing import Any, Protocol

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

__all__ = ["PlainView", "RichView", "TurnView", "fold_thought", "usage_line"]

CODE_THEME = "monokai"


class TurnView(Protocol):
    def __enter__(self) -> TurnView: ...
    def __exit__(self, *exc: Any) -> None: ...
    def thought(self, text: str) -> None: ...
    def text(self, text: str) -> None: ...
    def tool_call(self, name: str, arguments: str) -> None: ...
    def finish(self, response: dict[str, Any]) -> None: ...
    def interrupted(self, reason: str | None = None) -> None: ...
    def withdrawn(self) -> None: ...
    def failed(self, message: str) -> None: ...


def fold_thought(thought: str, width: int = 80) -> str:
    """A thought as one line of at most ``width`` characters: its length and its first words."""
    words = thought.split()
    prefix = f"thought ({len(words)} words): "
    head = " ".join(words)
    room = max(8, width - len(prefix))
    if len(head) > room:
        head = head[: room - 1].rstrip() + "…"
    return prefix + head


def usage_line(response: dict[str, Any], seconds: float | None, first_token: float | None) -> str:
    """``N tokens · R tok/s · prompt P (C cached) · first token F s``; ``seconds`` spans the first
    streamed delta to the last (None when the answer came in one piece: no rate to show)."""
    usage = response.get("usage") or {}
    out_tokens = int(usage.get("output_tokens") or 0)
    parts = [f"{out_tokens} tokens"]
    if seconds and seconds > 0 and out_tokens > 1:
        parts.append(f"{(out_tokens - 1) / seconds:.1f} tok/s")
    prompt = int(usage.get("input_tokens") or 0)
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    parts.append(f"prompt {prompt}" + (f" ({cached} cached)" if cached else ""))
    if first_token is not None:
        parts.append(f"first token {first_token:.1f} s")
    if response.get("status") == "incomplete":
        parts.append("cut at the output cap")
    return " · ".join(parts)


def _tail(text: str, width: int, rows: int) -> str:
    """The end of ``text`` that fits in ``rows`` rows of ``width`` cells (wrapping approximated)."""
    kept: list[str] = []
    used = 0
    for line in reversed(text.split("\n")):
        need = max(1, -(-cell_len(line) // max(1, width)))
        if used + need > rows:
            room = (rows - used) * width
            if room > 0:
                kept.append(line[-room:])
            break
        kept.append(line)
        used += need
    return "\n".join(reversed(kept))


class RichView:
    """One turn on a terminal. Use as a context manager around the stream."""

    def __init__(self, console: Console, typeahead: AbstractContextManager[Any] | None = None) -> None:
        self.console = console
        self._keys = typeahead or contextlib.nullcontext()  # keys typed meanwhile: held back, not echoed
        self._thought: list[str] = []
        self._text: list[str] = []
        self._calls: list[tuple[str, str]] = []
        self._started = time.monotonic()
        self._first: float | None = None
        self._last: float | None = None
        self._deltas = 0
        self._spinner = Spinner("dots", text=Text("waiting for the model…", style="dim"))
        self._live = Live(
            console=console,
            transient=True,
            auto_refresh=True,
            refresh_per_second=8,
            redirect_stdout=False,
            redirect_stderr=False,
            get_renderable=self._renderable,
        )

    def __enter__(self) -> RichView:
        self._keys.__enter__()
        self._live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop()
        self._keys.__exit__(*exc)

    def _stop(self) -> None:
        if self._live.is_started:
            self._live.stop()

    @property
    def answer(self) -> str:
        return "".join(self._text)

    # -- live ------------------------------------------------------------------------------------
    def _renderable(self) -> RenderableType:
        if self._first is None:
            return self._spinner
        width = self.console.width
        rows = max(3, self.console.height - 2)
        parts: list[RenderableType] = []
        thought = "".join(self._thought)
        if self._text:
            if thought:
                parts.append(Text(fold_thought(thought, width - 1), style="dim"))
                rows -= 1
            parts.append(Text(_tail(self.answer, width, rows)))
        else:
            parts.append(Text(_tail(thought, width, rows), style="dim italic"))
        return Group(*parts)

    def _arrived(self) -> None:
        self._last = time.monotonic()
        self._deltas += 1
        if self._first is None:
            self._first = self._last

    def thought(self, text: str) -> None:
        self._arrived()
        self._thought.append(text)

    def text(self, text: str) -> None:
        self._arrived()
        self._text.append(text)

    def tool_call(self, name: str, arguments: str) -> None:
        self._arrived()
        self._calls.append((name, arguments))

    # -- the end ---------------------------------------------------------------------------------
    def _print_answer(self) -> None:
        thought = "".join(self._thought)
        if thought.strip():
            self.console.print(Text(fold_thought(thought, self.console.width - 1), style="dim"))
        if self.answer.strip():
            self.console.print(Markdown(self.answer, code_theme=CODE_THEME))
        for name, arguments in self._calls:
            self.console.print(Text.assemble(("⚙ ", "yellow"), (name, "bold yellow"), " ", (arguments, "yellow")))

    def finish(self, response: dict[str, Any]) -> None:
        self._stop()
        self._print_answer()
        seconds = None
        if self._first is not None and self._last is not None and self._deltas > 1:
            seconds = self._last - self._first
        first = self._first - self._started if self._first is not None else None
        self.console.print(Text(usage_line(response, seconds, first), style="dim"))

    def interrupted(self, reason: str | None = None) -> None:
        self._stop()
        self._print_answer()
        why = f": {reason}" if reason else ""
        self.console.print(Text(f"⏹ stopped{why} (the conversation is kept)", style="yellow"))

    def withdrawn(self) -> None:
        self._stop()
        said = "⏹ stopped before the answer began: the message is back in the input line"
        self.console.print(Text(said, style="yellow"))

    def failed(self, message: str) -> None:
        self._stop()
        self._print_answer()  # what the user was reading stays (a server shut down mid-answer)
        self.console.print(Text(f"error: {message}", style="red"))


class PlainView:
    """Pipe mode: the answer's text only, as it arrives, after ``lead`` (the blank line that separates
    it from the answer before); errors one line on stderr."""

    def __init__(self, lead: str = "") -> None:
        self._text: list[str] = []
        self._lead = lead
        self._line_open = False  # answer text printed and its line not yet ended

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    @property
    def answer(self) -> str:
        return "".join(self._text)

    def thought(self, text: str) -> None:
        return None

    def text(self, text: str) -> None:
        if not self._text:
            sys.stdout.write(self._lead)
        self._text.append(text)
        self._line_open = True
        sys.stdout.write(text)
        sys.stdout.flush()

    def tool_call(self, name: str, arguments: str) -> None:
        sys.stderr.write(f"tool call: {name} {arguments}\n")

    def finish(self, response: dict[str, Any]) -> None:
        if self._line_open:
            self._line_open = False
            sys.stdout.write("\n")
            sys.stdout.flush()

    def interrupted(self, reason: str | None = None) -> None:
        self.finish({})
        if reason:
            sys.stderr.write(f"stopped: {reason}\n")
            sys.stderr.flush()

    def withdrawn(self) -> None:
        return None

    def failed(self, message: str) -> None:
        self.finish({})
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
