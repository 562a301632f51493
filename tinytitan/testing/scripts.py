"""The one builder of stub scripts for tests and examples (design.md "The scripted backend")."""

from __future__ import annotations

import copy
from typing import Any

from tinytitan.engine.models.stub import load_script

__all__ = ["STUB_MODEL", "TEXT_RULE", "script"]

STUB_MODEL = "stub-model"
TEXT_RULE: dict[str, Any] = {"reply": {"text": "hello from tinytitan"}}


def script(*rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A checked stub script serving ``STUB_MODEL`` with these rules (a plain text reply when none
    are given); ``extra`` sets its other top-level keys (``context_window``, ``tokenizer``,
    ``reasoning_levels`` …). The rules are copied, so a test may share one list between scripts."""
    body = {"model": STUB_MODEL, "rules": copy.deepcopy(list(rules) or [TEXT_RULE]), **extra}
    return load_script(body)
