"""Reasoning levels: the ladder, aliases, precedence and nearest-level resolution (reference §5)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tinytitan.engine.request import ReasoningControls

__all__ = ["LADDER", "Resolution", "normalize_level", "requested_level", "resolve_level"]

log = logging.getLogger("tinytitan.reasoning")

LADDER: tuple[str, ...] = ("off", "on", "minimal", "low", "medium", "high", "xhigh", "max")
_EFFORTS = LADDER[2:]
_ALIASES = {
    "none": "off",
    "false": "off",
    "disabled": "off",
    "auto": "on",
    "thinking": "on",
    "true": "on",
    "enabled": "on",
    "extra-high": "xhigh",
    "extra high": "xhigh",
    "extra_high": "xhigh",
    "highest": "xhigh",
    "ultra": "xhigh",
}


def normalize_level(word: str | None) -> str | None:
    """A ladder level for a client's word, or None when the word means nothing here."""
    if word is None:
        return None
    key = word.strip().lower()
    if key in LADDER:
        return key
    return _ALIASES.get(key)


@dataclass(frozen=True, slots=True)
class Resolution:
    level: str | None  # the applied level; None = the template's own default (no switch)
    note: str | None  # the log line's tail when something was substituted or ignored


def requested_level(controls: ReasoningControls) -> tuple[str | None, str | None]:
    """The raw word a request asks for, by precedence, and where it came from."""
    if controls.level is not None:
        return controls.level, "thinking"
    if controls.effort is not None:
        return controls.effort, "reasoning_effort"
    if controls.template_effort is not None:
        return controls.template_effort, "chat_template_kwargs.reasoning_effort"
    if controls.enable_thinking is not None:
        return ("on" if controls.enable_thinking else "off"), "chat_template_kwargs.enable_thinking"
    return None, None


def _nearest(requested: str, rendered: tuple[str, ...]) -> str | None:
    if requested in rendered or requested == "off":
        return requested
    efforts = [lvl for lvl in rendered if lvl not in ("off", "on")]
    if not efforts:
        return "on" if "on" in rendered else ("off" if "off" in rendered else None)
    if requested == "on":
        return max(efforts, key=LADDER.index)
    target = LADDER.index(requested)
    # nearest on the ladder; a tie goes to the cheaper level
    return min(efforts, key=lambda lvl: (abs(LADDER.index(lvl) - target), LADDER.index(lvl)))


def resolve_level(
    controls: ReasoningControls,
    rendered: tuple[str, ...],
    default: str | None,
    *,
    request_id: str = "-",
    force_off: str | None = None,
) -> Resolution:
    """Apply precedence, aliases and the nearest-level rule; log every substitution.

    ``force_off`` names why thinking must be off whatever was asked (structured output).
    """
    if controls.budget_tokens is not None:
        log.info(
            "request %s reasoning: reasoning_budget_tokens=%s accepted, not enforced "
            "(thinking is bounded by the level a template renders)",
            request_id,
            controls.budget_tokens,
        )
    if not rendered:  # the model has no thinking switch: it renders only its default
        return Resolution(None, None)
    base = _nearest(default, rendered) if default is not None else None
    if force_off is not None:
        applied = "off" if "off" in rendered else base
        note = f"thinking is off for {force_off}"
        log.info("request %s reasoning: %s; applied %s", request_id, note, applied)
        return Resolution(applied, note)
    word, _source = requested_level(controls)
    if word is None:
        return Resolution(base, None)
    level = normalize_level(word)
    if level is None:
        note = f"level '{word}' is not recognised; applied the default {base}"
        log.info("request %s reasoning: %s", request_id, note)
        return Resolution(base, note)
    applied = _nearest(level, rendered)
    if applied != level:
        note = f"level '{word}' is not supported by this model; applied {applied}"
        log.info("request %s reasoning: %s", request_id, note)
        return Resolution(applied, note)
    return Resolution(applied, None)
