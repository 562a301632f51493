"""One user message through the server: stream the answer, run the tools it asks for, keep the history.

``run_turn`` appends the user's message, streams the response into a view, appends the output
items the server returned, and — when the model called the chat's tools — asks, runs them,
appends their outputs and sends the conversation again (up to ``MAX_TOOL_ROUNDS``).

Ctrl-C while an answer streams closes the HTTP stream (the server cancels the generation) and
keeps the conversation: the message stays, with the part of the answer that was shown. Ctrl-C
before anything of the answer came (a long paste still being read) withdraws the message instead:
the turn is dropped (``withdrawn``) and the caller puts its text back in the input line. An answer
that falls into a verbatim cycle (``tinytitan.engine.output.cycles``) is stopped the same way, with one
line saying so; the conversation keeps one copy of the repeated text. A failed
turn is rolled back, so the history is as it was before the message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tinytitan.chat.client import (
    ChatClient,
    ChatError,
    Completed,
    ReasoningDelta,
    ServerDown,
    TextDelta,
    ToolCallItem,
)
from tinytitan.chat.interrupts import sigint_held
from tinytitan.chat.render import TurnView
from tinytitan.chat.session import Session, assistant_item, user_item
from tinytitan.chat.tools import run_tool, tool_specs
from tinytitan.engine.output.cycles import CycleDetector

__all__ = ["MAX_TOOL_ROUNDS", "Outcome", "TurnRunner"]

MAX_TOOL_ROUNDS = 8
Outcome = Literal["done", "stopped", "failed", "withdrawn"]
Confirm = Callable[[str, str], bool]  # (tool name, arguments) → run it?

DECLINED = "error: the user declined to run this tool call"
NO_TOOLS = "error: no tools are enabled in this chat"


@dataclass
class TurnRunner:
    client: ChatClient
    session: Session
    new_view: Callable[[], TurnView]
    confirm: Confirm | None = None  # None: tools are off (not offered)
    on_tool_output: Callable[[str], None] = field(default=lambda _out: None)

    def _tools(self) -> list[dict[str, Any]] | None:
        return tool_specs() if self.confirm is not None else None

    def run(self, text: str) -> Outcome:
        """The view has shown any error; ``ServerDown`` is raised too (after the rollback), so a script can stop."""
        mark = len(self.session.items)
        self.session.items.append(user_item(text, self.session.take_images()))
        try:
            for round_ in range(MAX_TOOL_ROUNDS + 1):
                outcome, calls = self._one_response(first=round_ == 0)
                if outcome == "withdrawn":
                    del self.session.items[mark:]
                if outcome != "done" or not calls:
                    return outcome
                if not self._run_calls(calls):
                    return "stopped"
            return "done"
        except ServerDown:
            del self.session.items[mark:]
            raise
        except ChatError:
            del self.session.items[mark:]
            return "failed"

    def _one_response(self, *, first: bool) -> tuple[Outcome, list[ToolCallItem]]:
        """``first``: the turn's first response (a Ctrl-C before any of it came withdraws the turn)."""
        view = self.new_view()
        arrived = False  # any delta or call of this response
        shown: list[str] = []
        calls: list[ToolCallItem] = []
        loop, thinking_loop = CycleDetector(), CycleDetector()
        with view:
            try:
                with contextlib.closing(self.client.stream(self.session.body(self._tools()))) as events:
                    for event in events:
                        arrived = arrived or not isinstance(event, Completed)
                        if isinstance(event, TextDelta):
                            shown.append(event.text)
                            view.text(event.text)
                            if loop.feed(event.text) is not None:
                                break
                        elif isinstance(event, ReasoningDelta):
                            view.thought(event.text)
                            if thinking_loop.feed(event.text) is not None:
                                break
                        elif isinstance(event, ToolCallItem):
                            calls.append(event)
                            view.tool_call(event.name, event.arguments)
                        elif isinstance(event, Completed):
                            with sigint_held():
                                self.session.items.extend(event.output)
                                view.finish(event.response)
                            return "done", calls
                with sigint_held():  # left for a cycle: a stream without completion raises ServerDown
                    self.client.reset()
                    kept = "".join(shown)
                    if loop.cycle is not None:  # one copy of the repeated text is enough
                        kept = kept[: len(kept) - loop.cycle.span + loop.cycle.period]
                    if kept:
                        self.session.items.append(assistant_item(kept))
                    cycle, where = (loop.cycle, "answer") if loop.cycle else (thinking_loop.cycle, "thinking")
                    assert cycle is not None
                    view.interrupted(f"the {where} kept repeating the same {cycle.period:,} characters")
                return "stopped", []
            except KeyboardInterrupt:
                with sigint_held():  # a second Ctrl-C must not leave the history half-kept
                    self.client.reset()  # the interrupted connection is not reused
                    if first and not arrived:
                        view.withdrawn()
                        return "withdrawn", []
                    if shown:
                        self.session.items.append(assistant_item("".join(shown)))
                    view.interrupted()
                return "stopped", []
            except ChatError as exc:
                view.failed(str(exc))
                raise

    def _run_calls(self, calls: list[ToolCallItem]) -> bool:
        """Answer every call (run, declined, or not offered); False when the user stopped the turn."""
        pending = list(calls)
        try:
            while pending:
                call = pending[0]
                if self.confirm is None:
                    output = NO_TOOLS
                elif self.confirm(call.name, call.arguments):
                    output = run_tool(call.name, call.arguments)
                    self.on_tool_output(output)
                else:
                    output = DECLINED
                self.session.items.append(_output_item(call.call_id, output))
                pending.pop(0)
        except KeyboardInterrupt:
            for call in pending:
                self.session.items.append(_output_item(call.call_id, "error: the user stopped this turn"))
            return False
        return self.confirm is not None


def _output_item(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}
