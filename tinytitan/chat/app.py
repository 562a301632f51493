"""The chat loop: a terminal conversation, one message per stdin line when stdin is a pipe, or one
prompt given on the command line (answered, then the chat exits).

``run_chat`` connects (``tinytitan.chat.connect``), runs the interactive loop, the pipe loop or the
one prompt, and shuts an in-process server down before the process exits. Exit status: 0, 1 when a
message failed, 2 when the server cannot be reached or refuses (or the model cannot be loaded).
In pipe mode the answers are separated by a blank line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.text import Text

from tinytitan.chat.client import ChatError, ServerDown
from tinytitan.chat.commands import EXIT, is_command, run_command
from tinytitan.chat.connect import Target, connect
from tinytitan.chat.images import image_part, text_only
from tinytitan.chat.interrupts import CtrlC
from tinytitan.chat.render import PlainView, RichView, TurnView
from tinytitan.chat.session import DEFAULT_MAX_TOKENS, Session
from tinytitan.chat.tools import TOOLS
from tinytitan.chat.turn import TurnRunner
from tinytitan.chat.typeahead import TypeAhead
from tinytitan.settings import Settings

__all__ = ["ChatApp", "ChatOptions", "run_chat"]


@dataclass
class ChatOptions:
    server: Settings = field(default_factory=Settings)  # in-process: what to load, as ``serve`` takes it
    url: str | None = None  # talk to this server instead
    model: str | None = None  # with ``url``: the served id to talk to
    api_key: str | None = None
    system: str | None = None
    max_tokens: int | None = None
    tools: bool = False
    before_model: Callable[[], None] | None = None  # runs before a model is loaded in-process
    loading: Callable[[], AbstractContextManager[None]] | None = None  # held open while it loads (a spinner)
    prompt: str | None = None  # one message to answer, then leave (with piped stdin appended)
    images: list[str] = field(default_factory=list)  # pictures (--image) attached to the first message


class ChatApp:
    def __init__(self, target: Target, session: Session, *, interactive: bool, tools: bool) -> None:
        self.target = target
        self.session = session
        self.interactive = interactive
        # pipe mode: stdout carries only the answers; everything else goes to stderr
        self.console = Console(highlight=False) if interactive else Console(stderr=True, highlight=False)
        confirm = (self._confirm if interactive else _decline) if tools else None
        self.runner = TurnRunner(target.client, session, self._view, confirm, self._tool_output)
        self.typeahead = TypeAhead()  # keys typed while an answer streams: the next prompt's text
        self._plain: PlainView | None = None  # pipe mode: the latest answer's view
        self._printed = False  # pipe mode: an answer was printed (the next one follows a blank line)

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(Text(text, style=style or ""))

    @contextlib.contextmanager
    def working(self, what: str) -> Iterator[None]:
        """A line saying what the chat waits for: in a terminal it counts the seconds until it is done."""
        if not self.interactive:
            self.say(f"{what}…", style="dim")
            yield
            return
        from rich.live import Live

        started = time.monotonic()

        class Elapsed:
            def __rich__(self) -> Text:
                return Text(f"{what}… {time.monotonic() - started:.0f} s (Ctrl-C stops)", style="dim")

        with Live(Elapsed(), console=self.console, refresh_per_second=4, transient=True):
            yield
        self.say(f"{what}: {time.monotonic() - started:.1f} s", style="dim")

    def error(self, message: str) -> None:
        self.console.print(Text(f"error: {message}", style="red"))

    def _view(self) -> TurnView:
        if self.interactive:
            return RichView(self.console, self.typeahead)
        self._printed = self._printed or bool(self._plain and self._plain.answer)
        self._plain = PlainView("\n" if self._printed else "")  # a blank line after any answer printed
        return self._plain

    def _confirm(self, name: str, arguments: str) -> bool:
        from prompt_toolkit import prompt

        answer = prompt(f"run {name} {arguments}? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    def _tool_output(self, output: str) -> None:
        if self.interactive:
            first = output.splitlines()[0] if output else ""
            self.say(f"→ {len(output):,} characters: {first[:60]}", style="dim")

    def banner(self) -> None:
        self.say(f"TinyTitan chat · {self.session.model} · {self.target.where}", style="bold")
        tools = f" · tools: {', '.join(TOOLS)} (asks before each run)" if self.runner.confirm else ""
        self.say(f"/help for commands · Ctrl-C stops an answer · Ctrl-D leaves{tools}", style="dim")
        self.say(f"{cap_note(self.session.max_output_tokens)} (/max-tokens changes it)", style="dim")

    def _handle(self, line: str) -> str | None:
        """One line from the user; returns ``EXIT`` to leave. ``ServerDown`` propagates."""
        if is_command(line):
            try:
                return run_command(self, line)
            except ServerDown:
                raise
            except ChatError as exc:
                self.error(str(exc))
            except KeyboardInterrupt:
                self.target.client.reset()
                self.say("stopped", style="yellow")
            return None
        outcome = self.runner.run(line)
        if outcome == "withdrawn" and self.interactive:  # stopped before the answer began: edit and resend
            self.typeahead.put_back(line)
        return "failed" if outcome == "failed" else None

    def interactive_loop(self) -> int:
        from tinytitan.chat.editor import Editor

        editor = Editor()
        self.banner()
        leaving = False  # the last key was Ctrl-C on an empty line: another one leaves
        with CtrlC(restore=False) as keys:  # leaving, a press only counts until _shut_down ignores it
            while True:
                try:
                    try:
                        keys.arm(keep=leaving)  # a press while the hint printed counts as the second
                        ahead, sent = self.typeahead.take()
                        line = editor.read(default=ahead, sent=sent)
                        leaving = False
                        if line.strip() and self._handle(line) == EXIT:
                            return 0
                    finally:
                        keys.disarm()  # from here to the next arm() a press is only counted
                except EOFError:
                    return 0
                except ServerDown:
                    pass  # shown as one red line; the server may come back
                except KeyboardInterrupt:
                    # Ctrl-C on an empty line, or pressed while no answer runs and the editor is not
                    # reading yet (two quick presses): the second in a row leaves
                    if leaving:
                        return 0
                    leaving = True
                    self.say("(Ctrl-C again, Ctrl-D or /exit to leave)", style="dim")

    def one_shot(self, prompt: str) -> int:
        """Answer one message (as a piped line is answered) and leave."""
        try:
            return 1 if self._handle(prompt) == "failed" else 0
        except ServerDown:
            return 2

    def pipe_loop(self, stdin: TextIO) -> int:
        failed = False
        for raw in stdin:
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                result = self._handle(line)
            except ServerDown:
                return 2
            if result == EXIT:
                break
            failed = failed or result == "failed"
        return 1 if failed else 0


def cap_note(cap: int | None) -> str:
    return f"answers up to {cap:,} tokens" if cap else "answers up to the context window (no cap)"


def _decline(_name: str, _arguments: str) -> bool:
    sys.stderr.write("a tool call needs a yes from a terminal; declined (stdin is not one)\n")
    return False


def _one_prompt(prompt: str) -> str:
    """The prompt, with piped stdin after it (``git diff | tinytitan chat "review this"``)."""
    if sys.stdin.isatty():
        return prompt
    piped = sys.stdin.read().strip("\n")
    return f"{prompt}\n\n{piped}" if piped.strip() else prompt


EMPTY_PROMPT = 'the prompt is empty; give a message (tinytitan chat "What is 2+2?"), or none to chat'


def run_chat(options: ChatOptions) -> int:
    interactive = sys.stdin.isatty() and options.prompt is None
    if options.prompt is not None and not options.prompt.strip() and sys.stdin.isatty():  # nothing piped either
        sys.stderr.write(f"tinytitan chat: {EMPTY_PROMPT}\n")
        return 2
    try:  # the pictures are read first: a missing one is said before any model loads
        images = [image_part(path)[0] for path in options.images]
    except ChatError as exc:
        sys.stderr.write(f"tinytitan chat: {exc}\n")
        return 2
    try:
        target = connect(
            options.url,
            options.server,
            api_key=options.api_key,
            before_model=options.before_model,
            loading=options.loading,
        )
    except (ChatError, OSError, ValueError) as exc:  # --url not answering or refusing; a model not loadable
        sys.stderr.write(f"tinytitan chat: {exc}\n")
        return 2
    except KeyboardInterrupt:  # while connecting
        return 130
    code = 2
    target.client.interactive = interactive
    try:
        model = options.model if options.url and options.model else (target.models or ["default"])[0]
        if options.url and options.model and not target.client.accepts(options.model):
            sys.stderr.write(f"tinytitan chat: the server does not serve '{options.model}'\n")
            return code
        cap = DEFAULT_MAX_TOKENS if options.max_tokens is None else options.max_tokens or None
        session = Session(model, options.system, options.server.reasoning, cap)
        tools = options.tools and target.client.tool_calls(model) is not False
        if options.tools and not tools:  # said once; the model would never call them
            sys.stderr.write(f"tinytitan chat: '{model}' has no tool-call syntax; --tools is off\n")
        if images and target.client.takes_images(model) is False:
            sys.stderr.write(f"tinytitan chat: {text_only(model)}\n")
            return code
        session.images.extend(images)
        app = ChatApp(target, session, interactive=interactive, tools=tools)
        if options.prompt is not None:
            message = _one_prompt(options.prompt)
            if not message.strip():
                sys.stderr.write(f"tinytitan chat: {EMPTY_PROMPT}\n")
                return code
            code = app.one_shot(message)
        else:
            code = app.interactive_loop() if interactive else app.pipe_loop(sys.stdin)
        return code
    except ServerDown as exc:
        sys.stderr.write(f"tinytitan chat: {exc}\n")
        return code
    finally:
        _shut_down(target, code)


def _shut_down(target: Target, code: int) -> None:
    """Stop the in-process server and its device thread before the interpreter finalizes.

    A second Ctrl-C here must not interrupt the wait (that is what used to abort the process); if
    the device thread is still busy when the wait ends (a model load cannot be interrupted),
    leave without finalizing at all.
    """
    with contextlib.suppress(ValueError):  # not the main thread (tests): no signal handling
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopped = target.close()
    if not stopped:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
