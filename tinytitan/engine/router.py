"""Model names (reference §3, §10): which names a request may use, and the ``-fast`` CLI strip."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import replace

from tinytitan.engine.errors import UnknownModel
from tinytitan.engine.request import ChatRequest, Message, Part

__all__ = ["FAST_SUFFIX", "resolve_model", "strip_cli"]

log = logging.getLogger("tinytitan.router")

FAST_SUFFIX = "-fast"


def resolve_model(name: str, served: str) -> tuple[str, bool]:
    """The base id a request names and whether the CLI strip applies; ``UnknownModel`` otherwise."""
    strip_all = os.environ.get("TINYTITAN_STRIP_CLI_PROMPT") == "1"
    if name == served:
        return served, strip_all
    if name == served + FAST_SUFFIX:
        return served, True
    raise UnknownModel(name)


def _strip_tags() -> list[str]:
    raw = os.environ.get("TINYTITAN_STRIP_TAGS", "system-reminder")
    return [t.strip() for t in raw.split(",") if t.strip()]


def _cut_spans(text: str, tags: list[str]) -> str:
    for tag in tags:
        text = re.sub(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", "", text, flags=re.IGNORECASE | re.DOTALL)
    return text.strip()


def _strip_content(content: str | tuple[Part, ...] | None, tags: list[str]) -> str | tuple[Part, ...] | None:
    if isinstance(content, str):
        return _cut_spans(content, tags) or content
    if content is None:
        return None
    parts = tuple(replace(p, text=_cut_spans(p.text, tags)) if p.text is not None else p for p in content)
    parts = tuple(p for p in parts if p.text != "" or p.type != "text")
    return parts or content


def strip_cli(request: ChatRequest) -> ChatRequest:
    """Drop tools, guidance, tool traffic and reminder spans (reference §10), with its guards."""
    tags = _strip_tags()
    kept: list[Message] = []
    for m in request.messages:
        if m.role in ("system", "developer", "tool"):
            continue
        if m.role == "assistant":
            content = _strip_content(m.content, tags)
            if not content:
                continue  # an assistant turn left empty (it only called tools)
            kept.append(replace(m, content=content, tool_calls=()))
        else:
            kept.append(replace(m, content=_strip_content(m.content, tags)))
    dropped = len(request.messages) - len(kept)
    messages = tuple(kept) or tuple(replace(m, tool_calls=()) for m in request.messages if m.role != "tool")
    log.info(
        "request %s strip: dropped %d tool definitions and %d messages; cut <%s> spans",
        request.request_id,
        len(request.tools),
        dropped,
        ">, <".join(tags),
    )
    return replace(request, messages=messages, tools=(), tool_choice=None)
