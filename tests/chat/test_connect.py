"""Which server the chat talks to: --url, the local server when it answers, else in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tinytitan.chat import connect as connect_module
from tinytitan.chat.client import ChatClient, ServerDown
from tinytitan.chat.connect import connect, local_url
from tinytitan.settings import Settings
from tinytitan.testing.process import free_port
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer


def test_url(server: LiveServer) -> None:
    target = connect(server.url + "/", Settings())
    assert target.models == [STUB_MODEL] and target.where == f"server at {server.url}"
    assert target.reasoning_levels is None and target.close()
    with pytest.raises(ServerDown):
        connect(f"http://127.0.0.1:{free_port()}", Settings())


def test_stub_in_process_serves_over_http_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "stub.json"
    path.write_text(json.dumps(script(reasoning_levels=["off", "low", "high"])))
    target = connect(None, Settings(stub=str(path)))
    assert target.where == "in-process (scripted)" and target.models == [STUB_MODEL]
    assert target.reasoning_levels == ("off", "low", "high")
    assert target.client.health() and target.client.url.startswith("http://127.0.0.1:")
    url = target.client.url
    assert target.close() is True  # the server and the generation thread are down
    assert ChatClient(url).health(timeout=1) is False


def test_default_is_the_local_server_else_in_process(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYTITAN_PORT", str(server.port))
    assert local_url() == server.url
    target = connect(None, Settings())
    assert target.where == f"server at {server.url}"
    target.close()

    loaded: list[Any] = []

    def in_process(*args: Any) -> str:
        loaded.append(args)
        return "in-process"

    monkeypatch.setattr(connect_module, "_in_process", in_process)
    monkeypatch.setenv("TINYTITAN_PORT", str(free_port()))
    monkeypatch.setenv("TINYTITAN_MODEL", "/models/mine")
    assert connect(None, Settings(reasoning="low")) == "in-process"
    assert loaded == [(Settings(model="/models/mine", reasoning="low"), None, None)]
