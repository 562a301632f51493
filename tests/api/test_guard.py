"""The local security boundary (reference §1): Host allow-list, Origin rule, API key, content types."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings, SettingsError
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

Serve = Callable[..., AbstractContextManager[LiveServer]]
BODY = {"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def guarded() -> Iterator[LiveServer]:
    """One server for the table tests below: each checks that its refusals reached no backend."""
    with live_server(StubBackend(script())) as live:
        yield live


def test_dns_rebinding_host_is_refused(server: LiveServer) -> None:
    r = httpx.get(server.v1 + "/models", headers={"host": "evil.example"})
    assert r.status_code == 403
    assert r.json()["error"]["message"] == "host not allowed"


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost", "[::1]:{port}"])
def test_loopback_hosts_are_allowed(guarded: LiveServer, host: str) -> None:
    headers = {"host": host.format(port=guarded.port)}
    assert httpx.get(guarded.v1 + "/models", headers=headers).status_code == 200


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
        pre = httpx.options(
            live.v1 + "/chat/completions",
            headers={"origin": "https://app.example", "access-control-request-method": "POST"},
        )
        assert pre.status_code == 204
        assert "POST" in pre.headers["access-control-allow-methods"]


def test_text_plain_is_never_parsed(server: LiveServer) -> None:
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


# -- issue #8: the boundary on every route and both envelopes ------------------------------------

ANTHROPIC = {"anthropic-version": "2023-06-01"}
MESSAGES = {"model": STUB_MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
POST_BODIES = {
    "/v1/chat/completions": BODY,
    "/v1/responses": {"model": STUB_MODEL, "input": "hi"},
    "/v1/responses/compact": {"model": STUB_MODEL, "input": "hi"},
    "/v1/messages": MESSAGES,
    "/v1/messages/count_tokens": MESSAGES,
}


def _every_route(live: LiveServer) -> list[tuple[str, str]]:
    doc = httpx.get(live.url + "/openapi.json", headers={"authorization": "Bearer sekret"}).json()
    routes = [
        (method.upper(), path.replace("{model_id}", STUB_MODEL).replace("{response_id}", "resp_x"))
        for path, ops in doc["paths"].items()
        for method in ops
    ]
    return [*routes, ("GET", "/openapi.json")]


def _hdrs(path: str, **extra: str) -> dict[str, str]:
    return {**(ANTHROPIC if path.startswith("/v1/messages") else {}), **extra}


def _is_envelope(r: httpx.Response, path: str) -> bool:
    doc = r.json()
    if path.startswith("/v1/messages"):
        return doc["type"] == "error" and doc["request_id"] == r.headers["request-id"] and "message" in doc["error"]
    return {"message", "type", "code"} <= set(doc["error"])


EVIL_ORIGINS = ["https://evil.example", "null", "http://127.0.0.1.evil.example", "http://localhost.evil.example"]


@pytest.mark.parametrize("path", list(POST_BODIES))
def test_dns_rebinding_is_refused_on_every_protocol(guarded: LiveServer, path: str) -> None:
    before = len(guarded.recorded)
    headers = _hdrs(path, host=f"evil.example:{guarded.port}")
    r = httpx.post(guarded.url + path, json=POST_BODIES[path], headers=headers)
    assert r.status_code == 403 and _is_envelope(r, path)
    assert r.json()["error"]["type"] == "permission_error"
    assert len(guarded.recorded) == before


@pytest.mark.parametrize("host", ["127.0.0.1.evil.example", "localhost.evil.example", "evil.example#127.0.0.1"])
def test_hosts_that_only_look_local_are_refused(guarded: LiveServer, host: str) -> None:
    assert httpx.get(guarded.v1 + "/models", headers={"host": host}).status_code == 403


@pytest.mark.parametrize("path", list(POST_BODIES))
@pytest.mark.parametrize("origin", EVIL_ORIGINS)
def test_browser_cross_origin_posts_are_refused(guarded: LiveServer, origin: str, path: str) -> None:
    before = len(guarded.recorded)
    r = httpx.post(guarded.url + path, json=POST_BODIES[path], headers={"origin": origin})
    assert r.status_code == 403 and _is_envelope(r, path)
    assert len(guarded.recorded) == before


@pytest.mark.parametrize("origin", EVIL_ORIGINS)
def test_cross_origin_unload_and_preflight_are_refused(guarded: LiveServer, origin: str) -> None:
    assert httpx.post(guarded.v1 + "/models/unload", headers={"origin": origin}).status_code == 403
    pre = httpx.options(
        guarded.v1 + "/chat/completions", headers={"origin": origin, "access-control-request-method": "POST"}
    )
    assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers


def test_null_origin_only_when_listed(serve: Serve) -> None:
    with serve(settings=Settings(cors_origins=["null"])) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=BODY, headers={"origin": "null"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "null"


@pytest.mark.parametrize("path", list(POST_BODIES))
@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_cors_simple_bodies_are_never_parsed(guarded: LiveServer, kind: str | None, path: str) -> None:
    """The three content types a page may POST without a preflight (or none at all) → 415, on every JSON route."""
    before = len(guarded.recorded)
    headers = _hdrs(path) if kind is None else _hdrs(path, **{"content-type": kind})
    r = httpx.post(guarded.url + path, content=json.dumps(POST_BODIES[path]), headers=headers)
    assert r.status_code == 415 and _is_envelope(r, path)
    assert len(guarded.recorded) == before


def test_api_key_guards_every_route_in_its_envelope(serve: Serve) -> None:
    with serve(settings=Settings(api_key="sekret")) as live:
        for method, path in _every_route(live):
            if path in ("/health", "/ready"):  # probes: a monitor or a service manager holds no key
                continue
            r = httpx.request(method, live.url + path, json=POST_BODIES.get(path), headers=_hdrs(path))
            assert r.status_code == 401, (method, path)
            if method != "HEAD":
                assert _is_envelope(r, path) and r.json()["error"]["type"] == "authentication_error"
        for probe in ("/health", "/ready"):
            assert httpx.get(live.url + probe).status_code == 200
            assert httpx.head(live.url + probe).status_code == 200
        for headers in ({"x-api-key": "sekret"}, {"authorization": "Bearer sekret"}):
            assert httpx.post(live.v1 + "/messages", json=MESSAGES, headers={**headers, **ANTHROPIC}).status_code == 200
            assert httpx.post(live.v1 + "/chat/completions", json=BODY, headers=headers).status_code == 200
        wrong = httpx.post(live.v1 + "/messages", json=MESSAGES, headers={"x-api-key": "sekreT", **ANTHROPIC})
        assert wrong.status_code == 401 and _is_envelope(wrong, "/v1/messages")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.com"])
def test_non_loopback_bind_needs_an_api_key(host: str) -> None:
    with pytest.raises(SettingsError, match="--api-key"):
        Settings(host=host).check()
    Settings(host=host, api_key="k").check()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_bind_needs_no_key(host: str) -> None:
    Settings(host=host).check()


def test_head_health_carries_the_same_headers_as_get(server: LiveServer) -> None:
    got, head = httpx.get(server.url + "/health"), httpx.head(server.url + "/health")
    assert head.status_code == got.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.content))
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
