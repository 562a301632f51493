"""The sampling defaults a request gets, and where each came from, on all three protocols (issue 26).

A request that sets nothing gets the model's own defaults (its generation_config.json, else its
publisher's recommendation), a ``serve`` flag over those, the conservative server default for the
rest — and a request's own value over all of them. The scripted backend records what it was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.defaults import (
    GENERATION_CONFIG,
    MEASURED,
    REQUEST,
    SERVE_FLAG,
    SERVER_DEFAULT,
    model_defaults,
)
from tinytitan.settings import Settings
from tinytitan.testing.server import LiveServer, live_server

PROTOCOLS = ("chat", "responses", "messages")
SMOLLM2 = "publisher: SmolLM2 model card"


class NamedStub(StubBackend):
    """A scripted model whose defaults are read as a model directory's are (publisher table included)."""

    @property
    def info(self) -> ModelInfo:
        info = super().info
        values, sources = model_defaults(info.defaults, [info.id])
        return ModelInfo(info.id, info.context_window, values, sources, info.reasoning_levels, None)


def post(live: LiveServer, protocol: str, **fields: Any) -> dict[str, Any]:
    """Send one request; return what the backend recorded for it."""
    model = live.engine.info.id
    messages = [{"role": "user", "content": "hi"}]
    if protocol == "chat":
        path, body = "/chat/completions", {"model": model, "messages": messages, **fields}
    elif protocol == "responses":
        path, body = "/responses", {"model": model, "input": "hi", **fields}
    else:
        path, body = "/messages", {"model": model, "max_tokens": 32, "messages": messages, **fields}
    httpx.post(live.v1 + path, json=body, timeout=60).raise_for_status()
    recorded: dict[str, Any] = live.engine.backend.recorded[-1]  # type: ignore[attr-defined]
    return recorded


@pytest.fixture(scope="module")
def from_config() -> Iterator[LiveServer]:
    """generation_config temperature and top_k; serve --top-p; the server default for nothing else."""
    backend = StubBackend({"model": "qwenish", "generation_config": {"temperature": 0.7, "top_k": 30}})
    with live_server(backend, settings=Settings(sampling_defaults={"top_p": 0.8})) as server:
        yield server


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LiveServer]:
    with live_server(NamedStub({"model": "SmolLM2-135M-Instruct"})) as server:
        yield server


@pytest.fixture(scope="module")
def unknown() -> Iterator[LiveServer]:
    with live_server(StubBackend({"model": "someones-model"})) as server:
        yield server


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_generation_config_and_a_serve_flag(from_config: LiveServer, protocol: str) -> None:
    got = post(from_config, protocol)
    assert got["sampling"] | {"seed": None} == {
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 30,
        "min_p": None,
        "repetition_penalty": None,
        "presence_penalty": None,
        "seed": None,
    }
    assert got["sampling_from"] == {"temperature": GENERATION_CONFIG, "top_p": SERVE_FLAG, "top_k": GENERATION_CONFIG}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_publisher_table_for_a_model_whose_files_carry_none(smollm2: LiveServer, protocol: str) -> None:
    got = post(smollm2, protocol)
    assert (got["sampling"]["temperature"], got["sampling"]["top_p"], got["sampling"]["top_k"]) == (0.2, 0.5, None)
    assert got["sampling_from"] == {"temperature": SMOLLM2, "top_p": MEASURED}  # the 135M's top_p (issue 37)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_server_default_for_a_model_nobody_describes(unknown: LiveServer, protocol: str) -> None:
    got = post(unknown, protocol)
    assert (got["sampling"]["temperature"], got["sampling"]["top_p"], got["sampling"]["top_k"]) == (0.3, 0.9, None)
    assert got["sampling_from"] == {"temperature": SERVER_DEFAULT, "top_p": SERVER_DEFAULT}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_requests_own_values_win_over_every_default(from_config: LiveServer, protocol: str) -> None:
    got = post(from_config, protocol, temperature=0.1, top_p=0.5)
    assert (got["sampling"]["temperature"], got["sampling"]["top_p"], got["sampling"]["top_k"]) == (0.1, 0.5, 30)
    assert got["sampling_from"] == {"temperature": REQUEST, "top_p": REQUEST, "top_k": GENERATION_CONFIG}


def test_the_responses_object_echoes_the_applied_defaults(smollm2: LiveServer) -> None:
    body = {"model": smollm2.engine.info.id, "input": "hi"}
    obj = httpx.post(smollm2.v1 + "/responses", json=body, timeout=60).raise_for_status().json()
    assert (obj["temperature"], obj["top_p"]) == (0.2, 0.5)
