"""The app served from a background thread (``tinytitan chat`` in-process, the tests' live server)."""

from __future__ import annotations

import httpx

from tinytitan.api.background import BackgroundServer
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.service import Engine
from tinytitan.testing.scripts import STUB_MODEL, script


def test_serves_on_a_loopback_port_and_stops_with_its_engine() -> None:
    engine = Engine(StubBackend(script()))
    server = BackgroundServer(engine).start()
    assert server.url.startswith("http://127.0.0.1:")
    body = {"model": STUB_MODEL, "input": "hi", "store": False}
    response = httpx.post(server.url + "/v1/responses", json=body, timeout=10)
    assert response.json()["output"][0]["content"][0]["text"] == "hello from tinytitan"
    assert server.stop() is True
    try:
        httpx.get(server.url + "/health", timeout=1)
        reachable = True
    except httpx.TransportError:
        reachable = False
    assert not reachable


def test_it_runs_the_event_loop_serve_runs() -> None:
    """uvicorn's ``loop="auto"``: uvloop, a dependency wherever it builds (``tinytitan serve`` gets it the same way)."""
    import uvicorn
    import uvloop

    factory = uvicorn.Config(app="tinytitan.api.app:create_app").get_loop_factory()
    assert factory is not None
    serves_on = factory()
    serves_on.close()
    assert isinstance(serves_on, uvloop.Loop)  # what ``serve`` runs
    engine = Engine(StubBackend(script()))
    server = BackgroundServer(engine).start()
    try:
        assert isinstance(server.loop, uvloop.Loop)
    finally:
        assert server.stop() is True
