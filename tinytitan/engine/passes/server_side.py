"""Server-side compaction, protocol-neutral: when a request asks for it, and the window it continues from.

Both APIs define it (Anthropic's ``context_management`` edit ``compact_20260112``, OpenAI's
``context_management`` entry ``compaction`` with ``compact_threshold``): when the prompt passes the
threshold, the server compacts the conversation (``compaction.compact``, as a continuation of it) and
the answer carries the note; the generation that follows — and every later turn, once the client
sends the note back — reads the compacted window: the client's guidance, then the note as the user
turn that stands for everything before it.
"""

from __future__ import annotations

from dataclasses import replace

from tinytitan.engine.passes.payload import summary_preamble
from tinytitan.engine.request import ChatRequest, Message, Source
from tinytitan.engine.service import Engine

__all__ = ["continue_after", "is_due", "note_turn"]


def note_turn(summary: str, where: Source | None = None) -> Message:
    """The user turn a note becomes where it replaces the conversation before it (the server's own text)."""
    return Message("user", summary_preamble(summary), server=True, source=where)


def continue_after(request: ChatRequest, summary: str) -> ChatRequest:
    """``request`` compacted: its guidance (the client's system and developer text), then the note."""
    guidance = tuple(m for m in request.messages if m.role in ("system", "developer") and not m.server)
    return replace(request, messages=(*guidance, note_turn(summary)))


async def is_due(engine: Engine, request: ChatRequest, threshold: int) -> bool:
    """Whether ``request``'s rendered prompt reaches ``threshold`` tokens — or no longer fits the window
    (compacting it is then the only way to answer). Every other refusal is raised as it would be."""
    tokens = await engine.prompt_tokens(request)
    return tokens >= threshold or tokens >= engine.info_for(request.model).context_window
