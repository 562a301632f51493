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
        pre = httpx.options(
            live.v1 + "/chat/completions",
            headers={"origin": "https://app.example", "access-control-request-method": "POST"},
        )
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


def test_dns_rebinding_is_refused_on_every_protocol(server: LiveServer) -> None:
    for path, body in POST_BODIES.items():
        r = httpx.post(server.url + path, json=body, headers=_hdrs(path, host=f"evil.example:{server.port}"))
        assert r.status_code == 403 and _is_envelope(r, path)
        assert r.json()["error"]["type"] == "permission_error"
    for host in ("127.0.0.1.evil.example", "localhost.evil.example", "evil.example#127.0.0.1"):
        assert httpx.get(server.v1 + "/models", headers={"host": host}).status_code == 403
    assert server.recorded == []


def test_browser_cross_origin_posts_are_refused(server: LiveServer) -> None:
    for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example", "http://localhost.evil.example"):
        for path, body in POST_BODIES.items():
            r = httpx.post(server.url + path, json=body, headers={"origin": origin})
            assert r.status_code == 403 and _is_envelope(r, path), (origin, path)
        assert httpx.post(server.v1 + "/models/unload", headers={"origin": origin}).status_code == 403
        pre = httpx.options(
            server.v1 + "/chat/completions", headers={"origin": origin, "access-control-request-method": "POST"}
        )
        assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers
    assert server.recorded == []


def test_null_origin_only_when_listed(serve: Serve) -> None:
    with serve(settings=Settings(cors_origins=["null"])) as live:
        r = httpx.post(live.v1 + "/chat/completions", json=BODY, headers={"origin": "null"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "null"


def test_cors_simple_bodies_are_never_parsed(server: LiveServer) -> None:
    """The three content types a page may POST without a preflight → 415, on every JSON route."""
    import json

    for path, body in POST_BODIES.items():
        raw = json.dumps(body)
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            r = httpx.post(server.url + path, content=raw, headers=_hdrs(path, **{"content-type": kind}))
            assert r.status_code == 415 and _is_envelope(r, path), (path, kind)
        r = httpx.post(server.url + path, content=raw, headers=_hdrs(path))  # no content-type at all
        assert r.status_code == 415
    assert server.recorded == []


def test_api_key_guards_every_route_in_its_envelope(serve: Serve) -> None:
    with serve(settings=Settings(api_key="sekret")) as live:
        for method, path in _every_route(live):
            if path == "/health":
                continue
            r = httpx.request(method, live.url + path, json=POST_BODIES.get(path), headers=_hdrs(path))
            assert r.status_code == 401, (method, path)
            if method != "HEAD":
                assert _is_envelope(r, path) and r.json()["error"]["type"] == "authentication_error"
        assert httpx.get(live.url + "/health").status_code == 200
        assert httpx.head(live.url + "/health").status_code == 200
        for headers in ({"x-api-key": "sekret"}, {"authorization": "Bearer sekret"}):
            assert httpx.post(live.v1 + "/messages", json=MESSAGES, headers={**headers, **ANTHROPIC}).status_code == 200
            assert httpx.post(live.v1 + "/chat/completions", json=BODY, headers=headers).status_code == 200
        wrong = httpx.post(live.v1 + "/messages", json=MESSAGES, headers={"x-api-key": "sekreT", **ANTHROPIC})
        assert wrong.status_code == 401 and _is_envelope(wrong, "/v1/messages")


def test_non_loopback_bind_needs_an_api_key() -> None:
    import pytest

    from tinytitan.settings import SettingsError

    for host in ("0.0.0.0", "::", "192.168.1.20", "example.com"):
        with pytest.raises(SettingsError, match="--api-key"):
            Settings(host=host).check()
        Settings(host=host, api_key="k").check()
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        Settings(host=host).check()


def test_head_health_carries_the_same_headers_as_get(server: LiveServer) -> None:
    got, head = httpx.get(server.url + "/health"), httpx.head(server.url + "/health")
    assert head.status_code == got.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.content))
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
