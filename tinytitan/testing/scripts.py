"""Helpers for building stub scripts in tests and examples."""

from __future__ import annotations

from typing import Any

from tinytitan.engine.backends.stub import load_script

__all__ = ["STUB_MODEL", "script"]

STUB_MODEL = "stub-model"


def script(*rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A stub script with these rules (a plain text reply when none are given)."""
    rules_list = list(rules) or [{"reply": {"text": "hello from tinytitan"}}]
    return load_script({"model": STUB_MODEL, "rules": rules_list, **extra})
