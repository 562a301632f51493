"""Schema-driven fuzzing of every POST route against ``tinytitan serve --stub`` (issue #8, reference §2).

At least 5,000 generated requests (schema-valid, schema-violating and garbled) over the served
``/openapi.json``: no answer is a 5xx, the process never dies or hangs, every 4xx is the
protocol's envelope, and afterwards the server is idle and still serves. ``benchmarks/fuzz.py``
runs the same fuzzer for longer.
"""

from __future__ import annotations

import httpx
import pytest

from tinytitan.api.openapi import BODY_ROUTES
from tinytitan.testing.fuzz import FUZZ_SCRIPT, fuzz
from tinytitan.testing.process import serve_stub_process
from tinytitan.testing.scripts import STUB_MODEL
from tinytitan.testing.server import LiveServer

REQUESTS = 5000


def test_openapi_documents_every_route(server: LiveServer) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    posts = {path for path, ops in doc["paths"].items() if "post" in ops}
    assert {
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/responses/compact",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/models/unload",
    } <= posts
    for route in BODY_ROUTES:
        body = doc["paths"][route.path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/" + route.wire_type.__name__)


@pytest.mark.timeout(600)  # 5,000 requests: about a minute alone, several on a busy machine
def test_fuzzed_requests_never_fail_the_server() -> None:
    with serve_stub_process(FUZZ_SCRIPT) as server:
        report = fuzz(server.url, requests=REQUESTS, model=STUB_MODEL, seed=8)
        assert server.alive
        assert report.sent >= REQUESTS
        assert report.server_errors == 0, report.problems
        assert report.problems == []
        assert report.statuses[200] > 0  # some requests got all the way through generation
        assert httpx.get(server.url + "/health").status_code == 200
        ok = httpx.post(
            server.v1 + "/chat/completions",
            timeout=30,
            json={"model": STUB_MODEL, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert ok.status_code == 200  # no slot was left behind
