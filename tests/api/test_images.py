"""Images in (issue 41) on all three protocols, through real sockets, against the scripted backend
with vision on: each protocol's spelling reaches the model as the same checked picture, in order,
answers are checked against the protocols' schemas, and the OpenAI and Anthropic SDKs send them."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing import sse
from tinytitan.testing.images import data_url, picture
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.wire_schemas import check_anthropic, check_open_responses

PNG = picture("png", 8, 6)
JPEG = picture("jpeg", 16, 9, (10, 200, 10))
GIF = picture("gif", 5, 5)
WEBP = picture("webp", 7, 3)
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
RULES: list[dict[str, Any]] = [
    {"when": {"image_digest": hashlib.sha256(JPEG).hexdigest()[:16]}, "reply": {"text": "a green one"}},
    {"reply": {"text": "seen", "describe_images": True}},
]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(*RULES, vision=True))) as server:
        yield server


def images_seen(live: LiveServer) -> list[list[dict[str, Any]]]:
    """Each recorded turn's images (media type, size, digest, detail) of the last request."""
    return [m.get("images", []) for m in live.recorded[-1]["messages"]]


def chat(live: LiveServer, content: list[dict[str, Any]], **fields: Any) -> httpx.Response:
    payload = {"model": STUB_MODEL, "messages": [{"role": "user", "content": content}], **fields}
    return httpx.post(live.v1 + "/chat/completions", json=payload, timeout=30)


# -- Chat Completions -------------------------------------------------------------------------------


def test_chat_image_url_parts_reach_the_model_in_order(live: LiveServer) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "before "},
        {"type": "image_url", "image_url": {"url": data_url(PNG), "detail": "low"}},
        {"type": "text", "text": " between "},
        {"type": "image_url", "image_url": {"url": data_url(WEBP, "image/webp")}},
    ]
    r = chat(live, content)
    assert r.status_code == 200, r.text
    answer = r.json()["choices"][0]["message"]["content"]
    assert answer == f"seen 2 image(s): image/png 8x6 {digest(PNG)[:12]}; image/webp 7x3 {digest(WEBP)[:12]}"
    (seen,) = images_seen(live)
    assert [(i["media_type"], i["width"], i["height"], i["detail"]) for i in seen] == [
        ("image/png", 8, 6, "low"),
        ("image/webp", 7, 3, None),
    ]
    assert live.recorded[-1]["messages"][0]["content"] == "before  between "
    assert "before <|image|> between <|image|>" in live.recorded[-1]["prompt"]


def test_a_rule_answers_by_the_image_it_was_shown(live: LiveServer) -> None:
    r = chat(
        live,
        [{"type": "text", "text": "what color?"}, {"type": "image_url", "image_url": data_url(JPEG, "image/jpeg")}],
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "a green one"


def test_chat_streams_an_image_request(live: LiveServer) -> None:
    r = chat(live, [{"type": "image_url", "image_url": {"url": data_url(GIF, "image/gif")}}], stream=True)
    assert r.status_code == 200, r.text
    chunks = [json.loads(frame) for frame in sse.data(r.text) if frame != "[DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == f"seen 1 image(s): image/gif 5x5 {digest(GIF)[:12]}"


def test_chat_tool_message_with_an_image(live: LiveServer) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
    tool = {"type": "function", "function": {"name": "screenshot", "parameters": {"type": "object"}}}
    messages = [
        {"role": "user", "content": "take a screenshot"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "image_url", "image_url": {"url": data_url(PNG)}}],
        },
    ]
    r = httpx.post(
        live.v1 + "/chat/completions", json={"model": STUB_MODEL, "messages": messages, "tools": [tool]}, timeout=30
    )
    assert r.status_code == 200, r.text
    assert [len(i) for i in images_seen(live)] == [0, 0, 1]


# -- Responses --------------------------------------------------------------------------------------


def responses(live: LiveServer, content: list[dict[str, Any]], **fields: Any) -> httpx.Response:
    payload = {"model": STUB_MODEL, "input": [{"type": "message", "role": "user", "content": content}], **fields}
    return httpx.post(live.v1 + "/responses", json=payload, timeout=30)


@pytest.mark.parametrize("url", [data_url(WEBP, "image/webp"), b64(WEBP)], ids=["data URL", "bare base64"])
def test_responses_input_image(live: LiveServer, url: str) -> None:
    r = responses(
        live,
        [{"type": "input_text", "text": "what is it?"}, {"type": "input_image", "image_url": url, "detail": "high"}],
    )
    assert r.status_code == 200, r.text
    check_open_responses(r.json(), "ResponseResource")
    assert r.json()["output"][0]["content"][0]["text"] == f"seen 1 image(s): image/webp 7x3 {digest(WEBP)[:12]}"
    assert images_seen(live)[0][0]["detail"] == "high"


def test_responses_keeps_the_image_for_the_next_turn_and_lists_it(live: LiveServer) -> None:
    first = responses(live, [{"type": "input_image", "image_url": data_url(PNG)}])
    assert first.status_code == 200, first.text
    follow = {"model": STUB_MODEL, "previous_response_id": first.json()["id"], "input": "and now?"}
    second = httpx.post(live.v1 + "/responses", json=follow, timeout=30)
    assert second.status_code == 200, second.text
    assert [len(i) for i in images_seen(live)] == [1, 0, 0]  # the stored turn still holds its picture
    items = httpx.get(f"{live.v1}/responses/{first.json()['id']}/input_items", timeout=30).json()["data"]
    assert items[0]["content"] == [{"type": "input_image", "image_url": data_url(PNG)}]


def test_responses_streams_an_image_request(live: LiveServer) -> None:
    r = responses(live, [{"type": "input_image", "image_url": data_url(PNG)}], stream=True)
    assert r.status_code == 200, r.text
    final = check_stream([data for _, data in sse.events(r.text)])  # every event against the schema
    assert final["status"] == "completed"


def test_responses_function_call_output_with_an_image(live: LiveServer) -> None:
    tool = {"type": "function", "name": "screenshot", "parameters": {"type": "object"}}
    items = [
        {"type": "message", "role": "user", "content": "take a screenshot"},
        {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_image", "image_url": data_url(PNG)}],
        },
    ]
    r = httpx.post(live.v1 + "/responses", json={"model": STUB_MODEL, "input": items, "tools": [tool]}, timeout=30)
    assert r.status_code == 200, r.text
    assert [len(i) for i in images_seen(live)] == [0, 0, 1]


# -- Messages ---------------------------------------------------------------------------------------


def image_block(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": b64(data)}}


def messages(live: LiveServer, *turns: dict[str, Any], **fields: Any) -> httpx.Response:
    payload = {"model": STUB_MODEL, "max_tokens": 64, "messages": list(turns), **fields}
    r = httpx.post(live.url + "/v1/messages", json=payload, headers=HEADERS, timeout=30)
    check_messages_answer("/v1/messages", r.status_code, r.headers["content-type"], r.text)
    return r


def test_messages_image_blocks(live: LiveServer) -> None:
    content = [image_block(JPEG, "image/jpeg"), {"type": "text", "text": "what color?"}]
    r = messages(live, {"role": "user", "content": content})
    assert r.status_code == 200, r.text
    check_anthropic(r.json(), "Message")
    assert r.json()["content"] == [{"type": "text", "text": "a green one"}]
    assert "<|image|>what color?" in live.recorded[-1]["prompt"]


def test_messages_stream_with_an_image(live: LiveServer) -> None:
    r = messages(live, {"role": "user", "content": [image_block(PNG)]}, stream=True)  # every event checked
    assert r.status_code == 200, r.text


def test_claude_codes_screenshot_in_a_tool_result(live: LiveServer) -> None:
    """Claude Code's Read tool on a .png answers with an image block inside the tool_result."""
    read = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/tmp/shot.png"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [image_block(PNG)]}
    tool = {"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
    r = messages(
        live,
        {"role": "user", "content": "read /tmp/shot.png"},
        {"role": "assistant", "content": [read]},
        {"role": "user", "content": [result]},
        tools=[tool],
    )
    assert r.status_code == 200, r.text
    assert r.json()["content"][0]["text"] == f"seen 1 image(s): image/png 8x6 {digest(PNG)[:12]}"
    assert [m["role"] for m in live.recorded[-1]["messages"]] == ["user", "assistant", "tool"]
    assert [len(i) for i in images_seen(live)] == [0, 0, 1]


def test_consecutive_user_turns_keep_their_images(live: LiveServer) -> None:
    r = messages(
        live,
        {"role": "user", "content": [image_block(PNG)]},
        {"role": "user", "content": [image_block(GIF, "image/gif")]},
    )
    assert r.status_code == 200, r.text
    (seen,) = images_seen(live)
    assert [i["digest"] for i in seen] == [digest(PNG), digest(GIF)]


def test_count_tokens_takes_images(live: LiveServer) -> None:
    payload = {"model": STUB_MODEL, "messages": [{"role": "user", "content": [image_block(PNG)]}]}
    r = httpx.post(live.url + "/v1/messages/count_tokens", json=payload, headers=HEADERS, timeout=30)
    assert r.status_code == 200, r.text
    check_anthropic(r.json(), "MessageTokensCount")


# -- the SDKs ---------------------------------------------------------------------------------------


def test_openai_sdk_chat_and_responses(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    completion = client.chat.completions.create(
        model=STUB_MODEL,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": data_url(PNG), "detail": "auto"}},
                ],
            }
        ],
    )
    assert completion.choices[0].message.content == f"seen 1 image(s): image/png 8x6 {digest(PNG)[:12]}"
    response = client.responses.create(
        model=STUB_MODEL,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is this?"},
                    {"type": "input_image", "image_url": data_url(JPEG, "image/jpeg"), "detail": "auto"},
                ],
            }
        ],
    )
    assert response.output_text == "a green one"


def test_anthropic_sdk(live: LiveServer) -> None:
    client = anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0)
    message = client.messages.create(
        model=STUB_MODEL,
        max_tokens=64,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": b64(GIF)}},
                    {"type": "text", "text": "what is this?"},
                ],
            }
        ],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == f"seen 1 image(s): image/gif 5x5 {digest(GIF)[:12]}"


# -- listings ---------------------------------------------------------------------------------------


def test_the_listings_say_the_model_takes_images(live: LiveServer) -> None:
    openai_list = httpx.get(live.v1 + "/models", timeout=30).json()
    assert openai_list["data"][0]["input_modalities"] == ["text", "image"]
    assert openai_list["models"][0]["input_modalities"] == ["text", "image"]  # Codex's catalog
    anthropic_list = httpx.get(live.url + "/v1/models", headers=HEADERS, timeout=30).json()
    check_anthropic(anthropic_list, "ModelList")
    assert anthropic_list["data"][0]["capabilities"]["image_input"] == {"supported": True}
    details = httpx.get(live.v1 + "/models?details=true", timeout=30).json()
    assert details["data"][0]["tinytitan"]["input_modalities"] == ["text", "image"]


def test_a_text_only_model_lists_text_alone() -> None:
    with live_server(StubBackend(script())) as server:
        listing = httpx.get(server.v1 + "/models", timeout=30).json()
        assert listing["data"][0]["input_modalities"] == ["text"]
        assert listing["models"][0]["input_modalities"] == ["text"]
        one = httpx.get(server.url + f"/v1/models/{STUB_MODEL}", headers=HEADERS, timeout=30).json()
        assert one["capabilities"]["image_input"] == {"supported": False}
