"""Shared fixtures: scripted backends, a real uvicorn server on an ephemeral loopback port, and the
tiny real model (built once per machine, cached, and once per session)."""

from __future__ import annotations

import atexit
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.device import thread as device_thread
from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer, live_server

# The tests speak plain HTTP to loopback servers only, yet every httpx client (the tests' own, the
# OpenAI and Anthropic SDKs', the chat's) loads a whole CA bundle when it is built: 0.05-0.2 s of CPU
# each, some thousand times a run. An empty certificate directory makes that free (httpx reads
# SSL_CERT_DIR; SSL_CERT_FILE would win over it). Child processes (serve, chat) inherit it.
_NO_CERTS = tempfile.mkdtemp(prefix="tinytitan-tests-no-certs-")
atexit.register(os.rmdir, _NO_CERTS)
os.environ.pop("SSL_CERT_FILE", None)
os.environ["SSL_CERT_DIR"] = _NO_CERTS

# TINYTITAN_DEVICE_CHECK=1, always (dev and CI alike): any MLX call off a device thread raises, from
# the first test on (before the tests import mlx-lm, so its modules see the checked functions).
# Child processes (serve, chat) inherit the variable; a served engine checks once its device worker
# calls install_check() too.
os.environ.setdefault(device_thread.CHECK_ENV, "1")
device_thread.install_check()


@pytest.fixture(autouse=True)
def _tinytitan_log_level() -> Iterator[None]:
    """Each test starts with the package's log level as the suite found it: the in-process chat quiets
    the ``tinytitan`` logger for its whole process, which would silence later tests' log checks."""
    import logging

    logger = logging.getLogger("tinytitan")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def device() -> Iterator[None]:
    """The test's own thread is a device thread: a test that calls MLX itself, standing in for the worker."""
    with device_thread.claimed(beside_workers=True):
        yield


@pytest.fixture
def default_script() -> dict[str, Any]:
    """The stub script ``serve()`` uses when given none (a test package may override this)."""
    return script()


@pytest.fixture
def serve(default_script: dict[str, Any]) -> Iterator[Callable[..., AbstractContextManager[LiveServer]]]:
    """``with serve(script(...), queue_limit=1) as server:`` — a live server for one test."""

    def start(stub_script: dict[str, Any] | None = None, **kwargs: Any) -> AbstractContextManager[LiveServer]:
        return live_server(StubBackend(stub_script or default_script), **kwargs)

    yield start


@pytest.fixture
def server(serve: Callable[..., AbstractContextManager[LiveServer]]) -> Iterator[LiveServer]:
    """A live server with the default script."""
    with serve() as live:
        yield live


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """A real MLX model directory (tinytitan.testing.tiny_model), cached under ~/.cache/tinytitan."""
    from tinytitan.testing.tiny_model import tiny_model_dir

    with device_thread.claimed(beside_workers=True):
        return tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_kv_dir() -> Path:
    """The tiny model with heads of 64 (``tiny-kv``): what a quantized KV cache (``--kv-bits``) groups."""
    from tinytitan.testing.tiny_model import tiny_model_dir

    with device_thread.claimed(beside_workers=True):
        return tiny_model_dir("tiny-kv")


@pytest.fixture(scope="session")
def tiny_vision_dir() -> Path:
    """A tiny random vision-language model (``tiny_model --vision``: Idefics3 through mlx-vlm), cached."""
    from tinytitan.testing.tiny_vision import tiny_vision_dir as build

    with device_thread.claimed(beside_workers=True):
        return build()


@pytest.fixture(scope="session")
def tiny_qwen_vl_dir() -> Path:
    """A tiny random Qwen2.5-VL (``tiny_model --vision --family qwen2.5-vl``: M-RoPE), cached."""
    from tinytitan.testing.tiny_qwen_vl import tiny_qwen_vl_dir as build

    with device_thread.claimed(beside_workers=True):
        return build()
