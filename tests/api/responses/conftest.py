"""Fixtures for the Responses tests: the default stub script and an SDK client (``serve`` is the root's)."""

from __future__ import annotations

from typing import Any

import pytest

from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer

from .support import RULES


@pytest.fixture
def default_script() -> dict[str, Any]:
    return script(*RULES)


@pytest.fixture
def client(server: LiveServer) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
