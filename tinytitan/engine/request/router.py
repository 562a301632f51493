"""Model names (reference §3, §10): which names a request may use, and the ``-fast`` CLI strip."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tinytitan.engine.errors import UnknownModel
from tinytitan.engine.request import ChatRequest, Message, Part

__all__ = ["FAST_SUFFIX", "StripRules", "resolve_model", "strip_cli"]

log = logging.getLogger("tinytitan.router")

FAST_SUFFIX = "-fast"


@dataclass(frozen=True, slots=True)
class StripRules:
    """The CLI strip's settings (``--strip-cli-prompt`` / ``--strip-tags``, from ``Settings``)."""

    always: bool = False  # strip every request, not only ``<id>-fast`` ones
    tags: tuple[str, ...] = ("system-reminder",)


def resolve_model(name: str, served: str | Sequence[str], rules: StripRules | None = None) -> tuple[str, bool]:
    """The served id a request names and whether the CLI strip applies; ``UnknownModel`` otherwise.

    An exact id wins, so a catalog id that itself ends in ``-fast`` stays reachable; else
    ``<id>-fast`` names ``<id>`` with the strip on.
    """
    ids = (served,) if isinstance(served, str) else tuple(served)
    if name in ids:
        return name, bool(rules and rules.always)
    base = name.removesuffix(FAST_SUFFIX)
    if base != name and base in ids:
        return base, True
    raise UnknownModel(name, served=ids)


def _cut_spans(text: str, tags: tuple[str, ...]) -> str:
    for tag in tags:
        text = re.sub(rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", "", text, flags=re.IGNORECASE | re.DOTALL)
    return text.strip()


def _strip_content(content: str | tuple[Part, ...] | None, tags: tuple[str, ...]) -> str | tuple[Part, ...] | None:
    if isinstance(content, str):
        return _cut_spans(content, tags) or content
    if content is None:
        return None
    parts = tuple(replace(p, text=_cut_spans(p.text, tags)) if p.text is not None else p for p in content)
    parts = tuple(p for p in parts if p.text != "" or p.type != "text")
    return parts or content


def strip_cli(request: ChatRequest, rules: StripRules | None = None) -> ChatRequest:
    """Drop tools, guidance, tool traffic and reminder spans (reference §10), with its guards."""
    tags = (rules or StripRules()).tags
    kept: list[Message] = []
    for m in request.messages:
        if m.server:  # the strip applies to the client's prompt, never to the server's own text
            kept.append(m)
            continue
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
    messages = tuple(kept) if any(not m.server for m in kept) else ()
    messages = messages or tuple(replace(m, tool_calls=()) for m in request.messages if m.role != "tool")
    log.info(
        "request %s strip: dropped %d tool definitions and %d messages; cut <%s> spans",
        request.request_id,
        len(request.tools),
        dropped,
        ">, <".join(tags),
    )
    return replace(request, messages=messages, tools=(), tool_choice=None)
