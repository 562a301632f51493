"""Fixtures for the Messages tests: a real uvicorn server over the scripted backend, per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tinytitan.engine.backends.stub import StubBackend
from tinytitan.testing.server import LiveServer, live_server

from .support import script


@pytest.fixture
def serve() -> Callable[..., AbstractContextManager[LiveServer]]:
    """``with serve(script(...), queue_limit=0) as server:`` — a live server for one test."""

    def start(stub_script: dict[str, Any] | None = None, **kwargs: Any) -> AbstractContextManager[LiveServer]:
        return live_server(StubBackend(stub_script or script()), **kwargs)

    return start


@pytest.fixture
def server(serve: Callable[..., AbstractContextManager[LiveServer]]) -> Iterator[LiveServer]:
    with serve() as live:
        yield live
