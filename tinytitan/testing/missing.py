"""A tool a test needs is missing: a failure in CI (where ``.ci/run`` installs it), a skip elsewhere."""

from __future__ import annotations

import os
from typing import NoReturn

__all__ = ["missing"]


def missing(reason: str) -> NoReturn:
    import pytest

    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
