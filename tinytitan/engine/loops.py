"""What the HTTP API does with a generation that has fallen into a verbatim loop (issue 26, item 2).

The policy, the same on every protocol:

- a request **without its own cap** — none, or one at least the model's context window (Claude Code
  sends 32000) — would otherwise loop until the window is full, minutes on a small model. Its
  generation is watched with ``CycleDetector`` (``output/cycles.py``: a verbatim block of text, 600
  characters or more in all, said 3 times in a row); once it fires the generation ends **as if the
  cap were hit**: Chat Completions ``finish_reason: "length"``, Responses ``status: "incomplete"``
  with ``incomplete_details.reason: "max_output_tokens"``, Messages ``stop_reason: "max_tokens"``.
  The text streamed so far is the client's, unaltered (the repetitions included); the server logs one
  warning naming the request.
- a request **with its own cap** below the window is never cut: the client chose how long it may run —
  unless it asks to be watched anyway (``ChatRequest.loop_guard``, the ``x-tinytitan-loop-guard: on``
  header ``tinytitan launch`` has each agent send: the cap it hands over is a number the agent plans
  its compaction with, not a length anyone chose).

``LoopGuard.for_request`` is None for the second kind; ``Job`` feeds the first kind's text and
reasoning to it — not a tool call's arguments, which are data the client asked for (a long run of one
character in a value is no loop of the model's).
"""

from __future__ import annotations

import logging

from tinytitan.engine.output.cycles import Cycle, CycleDetector

__all__ = ["LoopGuard"]

log = logging.getLogger("tinytitan.engine")


class LoopGuard:
    """The loop check of one generation; ``feed`` is True once its text has become a verbatim cycle."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.detector = CycleDetector()
        self.cycle: Cycle | None = None

    @classmethod
    def for_request(cls, request_id: str, cap: int, context_window: int, *, asked: bool = False) -> LoopGuard | None:
        """A guard for a request whose cap is the window's (it set none, or one as large), or that
        ``asked`` for one; else None."""
        return cls(request_id) if asked or cap >= context_window else None

    def feed(self, text: str) -> bool:
        if self.cycle is None and text:
            self.cycle = self.detector.feed(text)
        return self.cycle is not None

    def ended(self, completion_tokens: int) -> None:
        """Log the cut (once, when the guard fired)."""
        if self.cycle is None:
            return
        log.warning(
            "request %s: the generation repeats %d characters verbatim (%.1f times) after %d tokens; "
            "ended as if its output cap were hit (finish reason length) — set a max-tokens cap to "
            "let it run on",
            self.request_id,
            self.cycle.period,
            self.cycle.repeats,
            completion_tokens,
        )
