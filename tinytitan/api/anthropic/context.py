"""Anthropic's ``context_management`` edits on Messages and count_tokens: read, checked, applied.

- ``compact_20260112`` ``{trigger: {type: "input_tokens", value}, pause_after_compaction,
  instructions}``: server-side compaction (``compacting.py``) once the prompt reaches the trigger
  (150,000 input tokens unless given — or as soon as the prompt no longer fits the window, since a
  local window is usually smaller; a trigger below the API's 50,000 minimum is taken as given, for
  the same reason). ``instructions`` replace the handover ask.
- ``clear_thinking_20251015`` ``{keep}``: the thoughts of all but the last ``keep`` assistant turns
  that carry any are dropped before the template renders them (``keep`` defaults to 1 turn; ``"all"``
  or ``{type: "all"}`` keeps every one).
- ``clear_tool_uses_20250919`` is refused in the API's own words ("… does not support the
  clear_tool_uses_20250919 context management strategy"), which Claude Code reads to stop sending it
  for the session; any other edit is refused by name. Nothing is accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest

__all__ = ["DEFAULT_TRIGGER", "CompactEdit", "Edits", "clear_thinking", "read_edits"]

DEFAULT_TRIGGER = 150_000
COMPACT = "compact_20260112"
CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"


@dataclass(frozen=True, slots=True)
class CompactEdit:
    trigger: int  # input tokens
    pause: bool
    instructions: str | None


@dataclass(frozen=True, slots=True)
class Edits:
    """What a request's ``context_management`` asks for; ``sent``: it had one (the answer reports)."""

    sent: bool = False
    compact: CompactEdit | None = None
    keep_thinking: int | None = None  # clear_thinking's keep (turns); None: no clearing


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidRequest("must be an object", param=where)
    return value


def _count(value: Any, kind: str, where: str) -> int:
    """``{"type": kind, "value": n}`` with n ≥ 1."""
    body = _object(value, where)
    if body.get("type") != kind:
        raise InvalidRequest(f"type must be '{kind}'", param=f"{where}.type")
    n = body.get("value")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InvalidRequest("value must be a positive integer", param=f"{where}.value")
    return n


def _compact(edit: dict[str, Any], where: str) -> CompactEdit:
    trigger = (
        DEFAULT_TRIGGER if edit.get("trigger") is None else _count(edit["trigger"], "input_tokens", f"{where}.trigger")
    )
    pause = edit.get("pause_after_compaction", False)
    if not isinstance(pause, bool):
        raise InvalidRequest("pause_after_compaction must be a boolean", param=f"{where}.pause_after_compaction")
    instructions = edit.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequest("instructions must be a string or null", param=f"{where}.instructions")
    return CompactEdit(trigger, pause, instructions if instructions and instructions.strip() else None)


def _keep(edit: dict[str, Any], where: str) -> int | None:
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return None
    return _count(keep, "thinking_turns", f"{where}.keep")


def read_edits(value: Any, model: str) -> Edits:
    """``context_management`` as sent (``None``: absent), checked field by field."""
    if value is None:
        return Edits()
    body = _object(value, "context_management")
    edits = body.get("edits", [])
    if not isinstance(edits, list):
        raise InvalidRequest("edits must be a list", param="context_management.edits")
    compact: CompactEdit | None = None
    keep: int | None = None
    for i, raw in enumerate(edits):
        where = f"context_management.edits[{i}]"
        edit = _object(raw, where)
        kind = edit.get("type")
        if kind == COMPACT and compact is None:
            compact = _compact(edit, where)
        elif kind == CLEAR_THINKING:
            keep = _keep(edit, where)
        elif kind == CLEAR_TOOL_USES:  # no param: the envelope would put it first, where Claude Code reads
            raise InvalidRequest(
                f"{model} does not support the {CLEAR_TOOL_USES} context management strategy ({where}.type): "
                "this server keeps every tool result in the prompt",
                code="unsupported_value",
            )
        elif kind == COMPACT:
            raise InvalidRequest(f"at most one {COMPACT} edit is allowed", param=f"{where}.type")
        else:
            raise InvalidRequest(
                f"unknown context management edit {kind!r}; this server applies {COMPACT} and {CLEAR_THINKING}",
                param=f"{where}.type",
                code="unsupported_value",
            )
    return Edits(True, compact, keep)


def clear_thinking(chat: ChatRequest, keep: int | None) -> tuple[ChatRequest, int]:
    """``chat`` with the thoughts of all but its last ``keep`` thinking assistant turns dropped; how many."""
    if keep is None:
        return chat, 0
    thinking = [i for i, m in enumerate(chat.messages) if m.role == "assistant" and m.reasoning]
    cleared = thinking[: max(0, len(thinking) - keep)]
    if not cleared:
        return chat, 0
    messages = list(chat.messages)
    for i in cleared:
        messages[i] = replace(messages[i], reasoning=None)
    return replace(chat, messages=tuple(messages)), len(cleared)
