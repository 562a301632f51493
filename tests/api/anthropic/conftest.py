"""Fixtures for the Messages tests: the default stub script (``serve`` / ``server`` are the root's)."""

from __future__ import annotations

from typing import Any

import pytest

from tinytitan.testing.scripts import script

from .support import CONTEXT, RULES


@pytest.fixture
def default_script() -> dict[str, Any]:
    return script(*RULES, context_window=CONTEXT)
