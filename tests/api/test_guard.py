"""The local security boundary (reference §1): Host allow-list, Origin rule, API key, content types."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import httpx

from tinytitan.settings import Settings
from tinytitan.testing.scripts import STUB_MODEL
from tinytitan.testing.server import LiveServer

Serve = Callable[..., AbstractContextManager[LiveServer]]
BODY = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}]}


def test_dns_rebinding_host_is_refused(server: LiveServer) -> None:
    r = httpx.get(server.v1 + "/models", headers={"host": "evil.example"})
    assert r.status_code == 403
    assert r.json()["error"]["message"] == "host not allowed"
    for host in (f"127.0.0.1:{server.port}", "localhost", f"[::1]:{server.port}"):
        assert httpx.get(server.v1 + "/models", headers={"host": host}).status_code == 200


def test_cross_origin_post_is_refused(server: LiveServer) -> None:
    r = httpx.post(server.v1 + "/chat/completions", json=BODY, headers={"origin": "https://evil.example"})
    assert r.status_code == 403
    ok = httpx.post(server.v1 + "/chat/completions", json=BODY, headers={"origin": "http://localhost:3000"})
    assert ok.status_code == 200


def test_listed_origin_gets_cors(serve: Serve) -> None:
    with serve(settings=Settings(cors_origins=["https://app.example"])) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=BODY, headers={"origin": "https://app.example"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        pre = httpx.options(live.v1 + "/chat/completions", headers={
            "origin": "https://app.example", "access-control-request-method": "POST"})
        assert pre.status_code == 204
        assert "POST" in pre.headers["access-control-allow-methods"]


def test_text_plain_is_never_parsed(server: LiveServer) -> None:
    import json

    r = httpx.post(server.v1 + "/chat/completions", content=json.dumps(BODY), headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert server.recorded == []


def test_api_key_required_everywhere_but_health(serve: Serve) -> None:
    with serve(settings=Settings(api_key="sekret")) as live:
        assert httpx.get(live.url + "/health").status_code == 200
        r = httpx.get(live.v1 + "/models")
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        a = httpx.post(live.v1 + "/messages", json={}, headers={"anthropic-version": "2023-06-01"})
        assert a.status_code == 401 and a.json()["error"]["type"] == "authentication_error"
        assert httpx.get(live.v1 + "/models", headers={"authorization": "Bearer sekret"}).status_code == 200
        assert httpx.get(live.v1 + "/models", headers={"x-api-key": "sekret"}).status_code == 200
        assert httpx.get(live.v1 + "/models", headers={"x-api-key": "wrong"}).status_code == 401


def test_keys_are_ignored_without_api_key(server: LiveServer) -> None:
    r = httpx.get(server.v1 + "/models", headers={"authorization": "Bearer anything", "x-api-key": "x"})
    assert r.status_code == 200
