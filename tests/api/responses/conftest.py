"""Fixtures for the Responses tests: a live server over a scripted backend, and an SDK client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tinytitan.engine.backends.stub import StubBackend
from tinytitan.testing.server import LiveServer, live_server

from .support import stub_script


@pytest.fixture
def serve_stub() -> Callable[..., AbstractContextManager[LiveServer]]:
    def start(script: dict[str, Any] | None = None, **kwargs: Any) -> AbstractContextManager[LiveServer]:
        return live_server(StubBackend(script or stub_script()), **kwargs)

    return start


@pytest.fixture
def server(serve_stub: Callable[..., AbstractContextManager[LiveServer]]) -> Iterator[LiveServer]:
    with serve_stub() as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
