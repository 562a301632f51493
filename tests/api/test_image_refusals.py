"""Every bad image (issue 41.4) on every protocol: a 400 in the protocol's own envelope naming the
content part or the field that holds the picture — never a 500, never a hang, never a silent drop."""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.images import bomb_png, data_url, picture, truncated
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.wire_schemas import check_anthropic

PNG = picture("png", 8, 6)
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
LIMITS = Settings(max_images=2, max_image_mib=0.02, max_image_pixels=1_000_000)


def noise(side: int = 120) -> bytes:
    """A PNG larger than the test server's 0.02 MiB: random pixels do not compress."""
    from PIL import Image

    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, format="PNG")
    assert len(out.getvalue()) > 0.02 * 1024 * 1024
    return out.getvalue()


@pytest.fixture(scope="module")
def vision() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(vision=True)), settings=LIMITS) as server:
        yield server


@pytest.fixture(scope="module")
def text_only() -> Iterator[LiveServer]:
    with live_server(StubBackend(script())) as server:
        yield server


# Each protocol: how it sends a picture (a data URL, or its parts), and where the refusal lands.
Answer = tuple[int, str, str]  # status, param, message


def _openai(r: httpx.Response) -> Answer:
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    return r.status_code, error["param"], error["message"]


def _anthropic(r: httpx.Response) -> Answer:
    body = r.json()
    check_anthropic(body, "ErrorResponse")
    param, _, message = body["error"]["message"].partition(": ")
    return r.status_code, param, message


def chat(live: LiveServer, parts: list[dict[str, Any]]) -> Answer:
    content = [{"type": "text", "text": "look"}, *parts]
    payload = {"model": STUB_MODEL, "messages": [{"role": "user", "content": content}]}
    return _openai(httpx.post(live.v1 + "/chat/completions", json=payload, timeout=30))


def responses(live: LiveServer, parts: list[dict[str, Any]]) -> Answer:
    content = [{"type": "input_text", "text": "look"}, *parts]
    payload = {"model": STUB_MODEL, "input": [{"type": "message", "role": "user", "content": content}]}
    return _openai(httpx.post(live.v1 + "/responses", json=payload, timeout=30))


def messages(live: LiveServer, parts: list[dict[str, Any]]) -> Answer:
    content = [{"type": "text", "text": "look"}, *parts]
    payload = {"model": STUB_MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": content}]}
    return _anthropic(httpx.post(live.url + "/v1/messages", json=payload, headers=HEADERS, timeout=30))


def chat_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def responses_part(url: str) -> dict[str, Any]:
    return {"type": "input_image", "image_url": url}


def messages_part(url: str) -> dict[str, Any]:
    """A data URL as Anthropic's base64 source (its media type declared apart); a remote URL as a url source."""
    if url.startswith("http"):
        return {"type": "image", "source": {"type": "url", "url": url}}
    head, _, data = url.partition(",")
    media = head.removeprefix("data:").removesuffix(";base64")
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


PROTOCOLS: dict[
    str, tuple[Callable[[LiveServer, list[dict[str, Any]]], Answer], Callable[[str], dict[str, Any]], str]
] = {
    # name: (send, part, where the picture's data sits in part 1)
    "chat": (chat, chat_part, "messages[0].content[1].image_url.url"),
    "responses": (responses, responses_part, "input[0].content[1].image_url"),
    "messages": (messages, messages_part, "messages[0].content[1].source.data"),
}
MEDIA_FIELD = {
    "chat": "messages[0].content[1].image_url.url",
    "responses": "input[0].content[1].image_url",
    "messages": "messages[0].content[1].source.media_type",
}

# (id, data URL, where: "data" or "media", words the message must hold)
BAD: list[tuple[str, str, str, str]] = [
    ("corrupt", data_url(b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 20), "data", "could not be decoded"),
    ("truncated", data_url(truncated(picture("png", 64, 64))), "data", "could not be decoded"),
    ("truncated jpeg", data_url(truncated(picture("jpeg", 64, 64)), "image/jpeg"), "data", "could not be decoded"),
    ("not an image", data_url(b"hello, world"), "data", "not a PNG, JPEG, GIF or WebP image"),
    ("declared jpeg, bytes png", data_url(PNG, "image/jpeg"), "media", "declared image/jpeg but its bytes are PNG"),
    ("unsupported media type", data_url(PNG, "image/bmp"), "media", "'image/bmp' is not supported"),
    ("decompression bomb", data_url(bomb_png()), "data", "more than 1,000,000 pixels"),
    ("too large", data_url(noise()), "data", "larger than 0.02 MiB"),
    ("not base64", "data:image/png;base64,@@not base64@@", "data", "not valid base64"),
    ("empty", "data:image/png;base64,", "data", "empty"),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("url", "where", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_image_is_refused_naming_its_field(
    vision: LiveServer, protocol: str, url: str, where: str, words: str
) -> None:
    send, part, data_field = PROTOCOLS[protocol]
    status, param, message = send(vision, [part(url)])
    assert status == 400, message
    assert param == (MEDIA_FIELD[protocol] if where == "media" else data_field)
    assert words in message


def test_a_data_url_that_is_not_base64_is_refused(vision: LiveServer) -> None:
    status, param, message = chat(vision, [chat_part("data:image/png,rawbytes")])
    assert (status, param) == (400, "messages[0].content[1].image_url.url") and "base64" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_too_many_images_name_the_first_one_over(vision: LiveServer, protocol: str) -> None:
    send, part, _ = PROTOCOLS[protocol]
    status, param, message = send(vision, [part(data_url(PNG))] * 3)
    first = {"chat": "messages[0]", "responses": "input[0]", "messages": "messages[0]"}[protocol]
    assert (status, param) == (400, f"{first}.content[3]")
    assert "at most 2 images" in message and "--max-images" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_remote_url_is_refused_without_the_flag(vision: LiveServer, protocol: str) -> None:
    """No SSRF: the server fetches nothing a request names unless it runs with --allow-image-urls."""
    send, part, data_field = PROTOCOLS[protocol]
    status, param, message = send(vision, [part("http://169.254.169.254/latest/meta-data.png")])
    expected = "messages[0].content[1].source.url" if protocol == "messages" else data_field
    assert (status, param) == (400, expected)
    assert "--allow-image-urls" in message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_text_only_model_refuses_images_and_says_why(text_only: LiveServer, protocol: str) -> None:
    send, part, _ = PROTOCOLS[protocol]
    status, param, message = send(text_only, [part(data_url(PNG))])
    where = {"chat": "messages[0]", "responses": "input[0]", "messages": "messages[0]"}[protocol]
    assert (status, param) == (400, f"{where}.content[1]")
    assert f"model '{STUB_MODEL}' has no vision input" in message


def test_responses_file_id_is_refused_by_name(vision: LiveServer) -> None:
    status, param, message = responses(vision, [{"type": "input_image", "file_id": "file-abc"}])
    assert (status, param) == (400, "input[0].content[1].file_id") and "Files API" in message


def test_messages_file_source_is_refused_by_name(vision: LiveServer) -> None:
    status, param, message = messages(vision, [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}])
    assert (status, param) == (400, "messages[0].content[1].source.type") and "Files API" in message


def test_messages_image_in_an_assistant_turn_is_refused(vision: LiveServer) -> None:
    payload = {
        "model": STUB_MODEL,
        "max_tokens": 9,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [messages_part(data_url(PNG))]},
            {"role": "user", "content": "and?"},
        ],
    }
    r = httpx.post(vision.url + "/v1/messages", json=payload, headers=HEADERS, timeout=30)
    status, param, message = _anthropic(r)
    assert (status, param) == (400, "messages[1].content[0]") and "only allowed in user messages" in message


def test_chat_detail_must_be_one_the_api_defines(vision: LiveServer) -> None:
    part = {"type": "image_url", "image_url": {"url": data_url(PNG), "detail": "ultra"}}
    status, param, message = chat(vision, [part])
    assert (status, param) == (400, "messages[0].content[1].image_url.detail") and "auto, low, high" in message


def test_an_image_in_a_system_message_is_refused(vision: LiveServer) -> None:
    payload = {
        "model": STUB_MODEL,
        "messages": [{"role": "system", "content": [chat_part(data_url(PNG))]}, {"role": "user", "content": "hi"}],
    }
    status, param, message = _openai(httpx.post(vision.v1 + "/chat/completions", json=payload, timeout=30))
    assert (status, param) == (400, "messages[0].content[0]") and "only allowed in user messages" in message


def test_the_server_still_answers_after_every_refusal(vision: LiveServer) -> None:
    status = httpx.post(
        vision.v1 + "/chat/completions",
        json={"model": STUB_MODEL, "messages": [{"role": "user", "content": [chat_part(data_url(PNG))]}]},
        timeout=30,
    ).status_code
    assert status == 200
    assert base64.b64decode(data_url(PNG).partition(",")[2]) == PNG
