"""The shared routes a person meets first: ``GET /`` in a browser, and refusals that all look alike."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer, live_server


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with live_server(StubBackend(script()), settings=Settings(api_key="sekret")) as live:
        yield live


AUTH = {"authorization": "Bearer sekret"}


def test_the_root_says_the_server_runs_in_one_line(server: LiveServer) -> None:
    response = httpx.get(server.url + "/", headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("TinyTitan is running.") and response.text.count("\n") == 1
    assert "/v1" in response.text


def test_head_at_the_root_answers_as_get_without_a_body(server: LiveServer) -> None:
    """Claude Code checks the address with ``HEAD /`` on every start: 200, GET's headers, no body."""
    got = httpx.get(server.url + "/", headers=AUTH)
    response = httpx.head(server.url + "/", headers=AUTH)
    assert response.status_code == 200 and response.content == b""
    assert response.headers["content-length"] == str(len(got.content))
    assert response.headers["content-type"] == got.headers["content-type"]


def test_every_refusal_body_is_written_the_same_way(server: LiveServer) -> None:
    """The guard's 415 and 401 are encoded as the app's own 400 and 404 are: compact JSON, one envelope."""
    refusals = [
        httpx.post(server.v1 + "/chat/completions", content=b"x", headers={**AUTH, "content-type": "text/plain"}),
        httpx.get(server.v1 + "/models"),  # no key
        httpx.post(server.v1 + "/chat/completions", content=b"{", headers={**AUTH, "content-type": "application/json"}),
        httpx.get(server.url + "/nope", headers=AUTH),
    ]
    assert [r.status_code for r in refusals] == [415, 401, 400, 404]
    for response in refusals:
        body = json.loads(response.content)
        assert response.content == json.dumps(body, separators=(",", ":")).encode()
        assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"])
