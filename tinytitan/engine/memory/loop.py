"""``MemoryRounds``: one client request that may take several generation rounds (reference §14).

    round 1 ─► only memory calls? ─► run them, feed the results back as tool turns ─► round 2 …
         └──► no calls, a client call, or the round limit ─► Finished (usage of every round)

The ``Job`` runs the rounds (``Job(..., rounds=MemoryRounds(...))``) and holds its queue slot
across all of them; this module knows neither the Job nor the Engine, only how to run one
generation (``generate``), render a request and run blocking work. Text and thoughts stream to the client as they
come (the text of successive rounds is joined by a blank line); a call to an offered memory tool
never does. A turn that also calls a client tool ends the loop: the client's calls are returned,
and the memory calls beside them are still run (the model asked for them; their results are not
shown to it). After ``rounds`` memory rounds a last round runs without the memory tools, and any
memory call it still makes is dropped. The output cap bounds all rounds together, so a client
never sees more completion tokens than it allowed. While memory calls run and the next round
prefills, nothing reaches the client; the SSE layer's keepalives fill the gap.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from tinytitan.engine.events import Event, Finished, TextDelta, ToolCall, Usage
from tinytitan.engine.memory.decorator import MemoryPlan
from tinytitan.engine.memory.tools import run_tool
from tinytitan.engine.models.base import Generation, Prompt
from tinytitan.engine.request import Turn, ValidatedRequest
from tinytitan.engine.request.limits import output_budget

__all__ = ["MemoryRounds"]

log = logging.getLogger("tinytitan.memory")

ROUND_SEPARATOR = "\n\n"


Generate = Callable[[Generation], AsyncGenerator[Event, None]]


class MemoryRounds:
    """``plan``'s rounds; ``render`` a request into its prompt, ``window`` the model's context,
    ``blocking`` runs a function off the event loop."""

    def __init__(
        self,
        plan: MemoryPlan,
        *,
        render: Callable[[ValidatedRequest], Awaitable[Prompt]],
        window: int,
        blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
    ) -> None:
        self.plan = plan
        self.render = render
        self.window = window
        self.blocking = blocking
        self.rounds_run = 0  # memory rounds the server ran (for tests and logs)

    async def __call__(self, generate: Generate, gen: Generation) -> AsyncGenerator[Event, None]:
        plan = self.plan
        total = Usage()
        spoke = False  # the client has seen text from an earlier round
        while True:
            final = self.rounds_run >= plan.rounds
            memory_calls: list[ToolCall] = []
            client_calls = 0
            text: list[str] = []
            held = ""  # trailing whitespace: it may only separate text from a hidden call
            finished: Finished | None = None
            async for event in generate(gen):
                if isinstance(event, ToolCall):
                    if event.name in plan.names:
                        memory_calls.append(event)
                        continue
                    client_calls += 1
                elif isinstance(event, TextDelta):
                    visible = event.text.rstrip()
                    if not visible:
                        held += event.text
                        continue
                    if spoke and not text:
                        yield TextDelta(ROUND_SEPARATOR)
                    out, held = held + visible, event.text[len(visible) :]
                    text.append(out)
                    event = TextDelta(out)
                elif isinstance(event, Finished):
                    finished = event
                    continue
                yield event
            if finished is None:  # cancelled: the stream layer reports a generation cut short
                return
            total += finished.usage
            spoke = spoke or bool(text)
            if held and text and not memory_calls:
                yield TextDelta(held)  # nothing was hidden after it: the answer ends as the model wrote it
            if client_calls or not memory_calls or final:
                if memory_calls and final:
                    log.info(
                        "request %s: dropped %d memory call(s) after the last round",
                        plan.request.request_id,
                        len(memory_calls),
                    )
                elif memory_calls:
                    await self._run(memory_calls)  # beside a client call: run, but the loop ends here
                reason = "stop" if finished.reason == "tool_calls" and not client_calls else finished.reason
                yield Finished(reason, total, finished.stop_sequence)
                return
            results = await self._run(memory_calls)
            self.rounds_run += 1
            next_gen = await self._next_round(gen, "".join(text), memory_calls, results, total)
            if next_gen is None:
                yield Finished("length", total)
                return
            gen = next_gen

    async def _run(self, calls: list[ToolCall]) -> list[str]:
        store, session = self.plan.store, self.plan.conversation

        def run_all() -> list[str]:
            return [run_tool(store, call.name, call.arguments, session=session) for call in calls]

        results: list[str] = await self.blocking(run_all)
        log.info(
            "request %s: ran %s",
            self.plan.request.request_id,
            ", ".join(
                f"{c.name}{' (error)' if r.startswith('Error:') else ''}" for c, r in zip(calls, results, strict=True)
            ),
        )
        return results

    async def _next_round(
        self, gen: Generation, text: str, calls: list[ToolCall], results: list[str], used: Usage
    ) -> Generation | None:
        """The generation after a memory round: its calls and their results appended as turns.
        None when the output cap or the context window leaves no room for it."""
        previous = gen.request
        turns = (
            *previous.turns,
            Turn("assistant", text, tool_calls=tuple(calls)),
            *(Turn("tool", result, tool_call_id=c.id, name=c.name) for c, result in zip(calls, results, strict=True)),
        )
        base: ValidatedRequest = self.plan.final_request if self.rounds_run >= self.plan.rounds else previous
        request = replace(base, turns=turns)
        prompt = await self.render(request)
        room = output_budget(request.cap, self.window, prompt.n_tokens, used.completion_tokens)
        if room <= 0:
            return None
        return Generation(request, prompt, room)
