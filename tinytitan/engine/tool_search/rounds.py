"""``SearchRounds``: a request whose tool search the server runs (issue 39), like the memory loop.

    round 1 ─► a call to the search tool ─► run it at once (``ToolSearched``), go on reading the round
         └──► round over: searched, no client call ─► the call and its result appended as turns,
              the tools it found revealed ─► round 2 … ─► no search, a client call, or the limit ─► Finished

The ``Job`` runs the rounds and holds its queue slot across all of them. Everything the model writes
streams to the client as it comes; each search reaches it as one ``ToolSearched`` event where it ran
(the protocols show the call and its result there). The next round's prompt is the last one plus
the model's turn and the search result — whose text carries the found tools' definitions
(``request/deferred.py``) — and the tool list is unchanged, so the prompt cache serves the whole
previous round. A client that sends the answer back renders the same turns, so its next request
hits the cache too. After ``rounds`` searches a further search call is dropped and the answer ends.
The output cap bounds all rounds together; usage is every round's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, ToolSearched, Usage
from tinytitan.engine.models.base import Generation, Prompt
from tinytitan.engine.request import Tool, Turn, ValidatedRequest
from tinytitan.engine.request.deferred import revealed_text, search_error_text
from tinytitan.engine.request.limits import output_budget
from tinytitan.engine.tool_search.ranking import SearchError, search

__all__ = ["MAX_ROUNDS", "SearchRounds", "runs_searches"]

log = logging.getLogger("tinytitan.engine")

MAX_ROUNDS = 4
Generate = Callable[[Generation], AsyncGenerator[Event, None]]


def runs_searches(request: ValidatedRequest) -> bool:
    """Whether the model is offered a tool search the server runs."""
    return any(t.search is not None for t in request.tools)


class SearchRounds:
    """``render`` a request into its prompt, ``window`` the model's context, ``blocking`` runs a function
    off the event loop (a regex may be slow)."""

    def __init__(
        self,
        *,
        render: Callable[[ValidatedRequest], Awaitable[Prompt]],
        window: int,
        blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
        rounds: int = MAX_ROUNDS,
    ) -> None:
        self.render = render
        self.window = window
        self.blocking = blocking
        self.rounds = rounds
        self.rounds_run = 0  # rounds that ended in a search (for tests and logs)

    async def __call__(self, generate: Generate, gen: Generation) -> AsyncGenerator[Event, None]:
        total = Usage()
        while True:
            request = gen.request
            searches = {t.name: t for t in request.tools if t.search is not None}
            final = self.rounds_run >= self.rounds
            ran: list[tuple[ToolCall, tuple[Tool, ...], str]] = []  # each search: its call, what it found, its text
            client_calls = 0
            text: list[str] = []
            thought: list[str] = []
            finished: Finished | None = None
            async for event in generate(gen):
                if isinstance(event, ToolCall) and event.name in searches:
                    if final:
                        log.info("request %s: dropped a tool search after %d rounds", request.request_id, self.rounds)
                        continue
                    found, result, searched = await self._search(searches[event.name], request, event)
                    ran.append((event, found, result))
                    yield searched
                    continue
                if isinstance(event, ToolCall):
                    client_calls += 1
                elif isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ReasoningDelta):
                    thought.append(event.text)
                elif isinstance(event, Finished):
                    finished = event
                    continue
                yield event
            if finished is None:  # cancelled: the stream layer reports a generation cut short
                return
            total += finished.usage
            if client_calls or not ran or final:
                reason = "stop" if finished.reason == "tool_calls" and not client_calls else finished.reason
                yield Finished(reason, total, finished.stop_sequence)
                return
            self.rounds_run += 1
            next_gen = await self._next_round(gen, "".join(text), "".join(thought) or None, ran, total)
            if next_gen is None:
                yield Finished("length", total)
                return
            gen = next_gen

    async def _search(
        self, tool: Tool, request: ValidatedRequest, call: ToolCall
    ) -> tuple[tuple[Tool, ...], str, ToolSearched]:
        kind = tool.search or "bm25"
        try:
            found: tuple[Tool, ...] = await self.blocking(lambda: search(kind, request.deferred, call.arguments))
        except SearchError as exc:
            log.info("request %s: a %s tool search failed: %s", request.request_id, kind, exc.detail)
            return (), search_error_text(exc.code, exc.detail), ToolSearched(call, error=exc.code, detail=exc.detail)
        log.info(
            "request %s: %s tool search found %s", request.request_id, kind, ", ".join(t.name for t in found) or "none"
        )
        return found, revealed_text("", found), ToolSearched(call, tuple(t.name for t in found))

    async def _next_round(
        self,
        gen: Generation,
        text: str,
        thought: str | None,
        ran: list[tuple[ToolCall, tuple[Tool, ...], str]],
        used: Usage,
    ) -> Generation | None:
        """The generation after a search round: the model's turn and the results appended, what they
        found revealed. None when the output cap or the context window leaves no room for it."""
        previous = gen.request
        calls = tuple(call for call, _, _ in ran)
        turns = (
            *previous.turns,
            Turn("assistant", text, tool_calls=calls, reasoning=thought),
            *(Turn("tool", result, tool_call_id=call.id, name=call.name) for call, _, result in ran),
        )
        revealed = list(previous.revealed)
        for tool in (t for _, found, _ in ran for t in found):
            if tool not in revealed:
                revealed.append(tool)
        request = replace(previous, turns=turns, revealed=tuple(revealed))
        prompt = await self.render(request)
        room = output_budget(request.cap, self.window, prompt.n_tokens, used.completion_tokens)
        if room <= 0:
            return None
        return Generation(request, prompt, room)
