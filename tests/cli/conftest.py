"""The terminal tests leave nothing running: every terminal a test opened (``tinytitan.testing.terminal``)
is ended after it, whole process group included, whether the test passed or failed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tinytitan.testing.terminal import reap


@pytest.fixture(autouse=True)
def _reap_terminals() -> Iterator[None]:
    yield
    reap()
