"""Fetching image URLs (issue 41.2) only with --allow-image-urls: a local web server stands in for the
web; what it serves is checked like any image, and every way a fetch fails is a 400 naming the field.
The Open Responses compliance suite's ``image-input`` test sends exactly this request (its URL on the
public web); ``test_the_compliance_suites_image_input_request`` runs it against a local one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.events import Source
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ChatRequest, Message, Part
from tinytitan.engine.request.image_check import ImageLimits, ImageRef
from tinytitan.engine.request.image_load import has_images, load_images
from tinytitan.settings import Settings
from tinytitan.testing.images import picture
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import live_server
from tinytitan.testing.wire_schemas import check_open_responses

PNG = picture("png", 12, 4)
HANG = threading.Event()  # set at teardown: the slow route's handler returns


class _Pictures(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/slow.png":
            HANG.wait(30)
            return
        body, status = {"/logo.png": (PNG, 200), "/big.png": (b"\x89PNG" + b"\0" * 300_000, 200)}.get(
            self.path, (b"not here", 404)
        )
        self.send_response(status)
        self.send_header("content-type", "image/png")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pictures)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        HANG.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


async def _blocking(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


def load(url: str, limits: ImageLimits) -> Part:
    ref = ImageRef(url, "messages[0].content[0].image_url.url")
    request = ChatRequest(
        model="m", messages=(Message("user", (Part("image", source=Source("messages[0].content[0]"), ref=ref),)),)
    )
    loaded = asyncio.run(load_images(request, limits, _blocking))
    content = loaded.messages[0].content
    assert isinstance(content, tuple) and not has_images(loaded)
    return content[0]


ALLOWED = ImageLimits(fetch_urls=True, fetch_timeout=2.0, max_bytes=100_000)


def test_an_allowed_url_is_fetched_and_checked(web: str) -> None:
    part = load(f"{web}/logo.png", ALLOWED)
    assert part.image is not None and (part.image.width, part.image.height) == (12, 4)
    assert part.ref is None


def test_a_url_is_refused_without_the_flag(web: str) -> None:
    with pytest.raises(InvalidRequest, match="--allow-image-urls") as info:
        load(f"{web}/logo.png", replace(ALLOWED, fetch_urls=False))
    assert info.value.param == "messages[0].content[0].image_url.url"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/missing.png", "could not be fetched: HTTP 404"),
        ("/big.png", "larger than"),
        ("/slow.png", "no answer within 2 s"),
    ],
    ids=["not found", "too large", "too slow"],
)
def test_a_failed_fetch_is_a_400_naming_the_field(web: str, path: str, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words) as info:
        load(web + path, ALLOWED)
    assert info.value.param == "messages[0].content[0].image_url.url"


def test_an_unreachable_host_is_a_400() -> None:
    with pytest.raises(InvalidRequest, match="could not be fetched") as info:
        load("http://127.0.0.1:9/x.png", ALLOWED)  # the discard port: nothing listens
    assert info.value.param == "messages[0].content[0].image_url.url"


def test_other_schemes_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="data: URL, base64 data or an http"):
        load("file:///etc/passwd", ALLOWED)


def test_the_compliance_suites_image_input_request(web: str) -> None:
    """openresponses' ``image-input`` test: input_text and an input_image URL, a completed response
    that fits the ResponseResource schema and has output, against a server started with the flag."""
    settings = Settings(allow_image_urls=True)
    rule = {"reply": {"text": "a logo", "describe_images": True}}
    with live_server(StubBackend(script(rule, vision=True)), settings=settings) as live:
        request = {
            "model": STUB_MODEL,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
                        {"type": "input_image", "image_url": f"{web}/logo.png"},
                    ],
                }
            ],
        }
        r = httpx.post(live.v1 + "/responses", json=request, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        check_open_responses(body, "ResponseResource")
        assert body["status"] == "completed" and body["output"]
        assert body["output"][0]["content"][0]["text"].startswith("a logo 1 image(s): image/png 12x4")
