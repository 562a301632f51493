"""``MemoryJob``: one client request that may take several generation rounds (reference §14).

    round 1 ─► only memory calls? ─► run them, feed the results back as tool turns ─► round 2 …
         └──► no calls, a client call, or the round limit ─► Finished (usage of every round)

The job holds its queue slot across all rounds. Text and thoughts stream to the client as they
come (the text of successive rounds is joined by a blank line); a call to an offered memory tool
never does. A turn that also calls a client tool ends the loop: the client's calls are returned,
and the memory calls beside them are still run (the model asked for them; their results are not
shown to it). After ``rounds`` memory rounds a last round runs without the memory tools, and any
memory call it still makes is dropped. The output cap bounds all rounds together, so a client
never sees more completion tokens than it allowed. While memory calls run and the next round
prefills, nothing reaches the client; the SSE layer's keepalives fill the gap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import replace

from tinytitan.engine.backends.base import Generation, Prompt
from tinytitan.engine.events import Event, Finished, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Job
from tinytitan.engine.memory.decorator import MemoryPlan
from tinytitan.engine.memory.tools import run_tool
from tinytitan.engine.queue import Ticket
from tinytitan.engine.request import Turn, ValidatedRequest
from tinytitan.engine.service import Engine

__all__ = ["MemoryJob"]

log = logging.getLogger("tinytitan.memory")

ROUND_SEPARATOR = "\n\n"


class MemoryJob(Job):
    def __init__(self, engine: Engine, plan: MemoryPlan, prompt: Prompt, max_new: int, ticket: Ticket) -> None:
        super().__init__(engine, plan.request, prompt, max_new, ticket)
        self.plan = plan
        self.rounds_run = 0  # memory rounds the server ran (for tests and logs)

    async def _rounds(self) -> AsyncGenerator[Event, None]:
        plan, gen = self.plan, self.generation
        total = Usage()
        spoke = False  # the client has seen text from an earlier round
        while True:
            final = self.rounds_run >= plan.rounds
            memory_calls: list[ToolCall] = []
            client_calls = 0
            text: list[str] = []
            held = ""  # trailing whitespace: it may only separate text from a hidden call
            finished: Finished | None = None
            async for event in self._generate(gen):
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
            gen = self.generation = next_gen

    async def _run(self, calls: list[ToolCall]) -> list[str]:
        store, session = self.plan.store, self.plan.conversation

        def run_all() -> list[str]:
            return [run_tool(store, call.name, call.arguments, session=session) for call in calls]

        results = await asyncio.to_thread(run_all)
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
        models = self.engine.models  # the request's own model (a catalog serves several)
        prompt = await asyncio.to_thread(models.backend(request.model_id).render, request)
        window = models.info(request.model_id).context_window
        room = min(request.cap - used.completion_tokens, window - prompt.n_tokens)
        if room <= 0:
            return None
        return Generation(request, prompt, room, cancel=gen.cancel)
