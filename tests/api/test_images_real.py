"""Images in (issue 41) with the tiny random vision model (``tiny_model --vision``) through real sockets:
each protocol, streamed and not, answers a picture in its schema's shapes, its usage counts the
picture's image tokens exactly as ``count_tokens`` does, the OpenAI and Anthropic SDKs send one, and
the prompt cache hits on the same picture and never past a different one's first image token."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tinytitan.engine.device.images import VIRTUAL_BASE
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest
from tinytitan.testing import sse
from tinytitan.testing.images import checked_picture, data_url, image_message, picture
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.wire_schemas import check_anthropic, check_open_responses

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
SIZE = (100, 50)  # two tiles and the global view: 12 image tokens for the tiny model's processor
QUESTION = "What is in this picture?"
PROTOCOLS = ["chat", "responses", "messages"]


def png(color: tuple[int, int, int]) -> bytes:
    return picture("png", *SIZE, color)


@pytest.fixture(scope="module")
def live(tiny_vision_dir: Path) -> Iterator[LiveServer]:
    with live_server(MlxBackend(str(tiny_vision_dir))) as server:
        yield server


def model_tokens(live: LiveServer, color: tuple[int, int, int]) -> list[int]:
    """The prompt the model sees for ``QUESTION`` and a ``color`` picture."""
    picture_ = checked_picture(color, SIZE)
    return live.prompt_tokens(ChatRequest(model=live.engine.info.id, messages=(image_message(QUESTION, picture_),)))


def image_positions(tokens: list[int]) -> list[int]:
    return [i for i, t in enumerate(tokens) if t >= VIRTUAL_BASE]


# -- one request on each protocol -----------------------------------------------------------------


def content(protocol: str, data: bytes, text: str = QUESTION) -> list[dict[str, Any]]:
    encoded = base64.b64encode(data).decode()
    if protocol == "chat":
        return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": data_url(data)}}]
    if protocol == "responses":
        return [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": data_url(data)}]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}}
    return [{"type": "text", "text": text}, image]


def body(live: LiveServer, protocol: str, data: bytes, **fields: Any) -> dict[str, Any]:
    parts = content(protocol, data)
    if protocol == "responses":
        return {"model": live.engine.info.id, "input": [{"role": "user", "content": parts}], **fields}
    return {"model": live.engine.info.id, "messages": [{"role": "user", "content": parts}], **fields}


def count(live: LiveServer, protocol: str, data: bytes) -> int:
    """What the server's own count route says for this request (Chat Completions has none: Responses')."""
    if protocol == "messages":
        r = httpx.post(live.url + "/v1/messages/count_tokens", json=body(live, protocol, data), headers=HEADERS)
        check_anthropic(r.json(), "MessageTokensCount")
    else:
        r = httpx.post(live.v1 + "/responses/input_tokens", json=body(live, "responses", data), timeout=60)
    assert r.status_code == 200, r.text
    tokens: int = r.json()["input_tokens"]
    return tokens


def send(live: LiveServer, protocol: str, data: bytes, stream: bool) -> dict[str, Any]:
    """The request's usage (Chat Completions' and Responses' spelling, or Messages'), schema-checked."""
    if protocol == "chat":
        fields: dict[str, Any] = {"max_tokens": 4, "stream": stream}
        if stream:
            fields["stream_options"] = {"include_usage": True}
        r = httpx.post(live.v1 + "/chat/completions", json=body(live, protocol, data, **fields), timeout=300)
        assert r.status_code == 200, r.text
        if not stream:
            whole: dict[str, Any] = ChatCompletion.model_validate(r.json(), strict=True).model_dump()["usage"]
            return whole
        chunks = [ChatCompletionChunk.model_validate_json(f) for f in sse.data(r.text) if f != "[DONE]"]
        (counted,) = [c.usage for c in chunks if c.usage is not None]
        return counted.model_dump()
    if protocol == "responses":
        fields = {"max_output_tokens": 4, "stream": stream}
        r = httpx.post(live.v1 + "/responses", json=body(live, protocol, data, **fields), timeout=300)
        assert r.status_code == 200, r.text
        final = check_stream([d for _, d in sse.events(r.text)]) if stream else r.json()
        check_open_responses(final, "ResponseResource")
        usage: dict[str, Any] = final["usage"]
        return {"prompt_tokens": usage["input_tokens"], **usage}
    r = httpx.post(
        live.url + "/v1/messages",
        json=body(live, protocol, data, max_tokens=4, stream=stream),
        headers=HEADERS,
        timeout=300,
    )
    assert r.status_code == 200, r.text
    check_messages_answer("/v1/messages", r.status_code, r.headers["content-type"], r.text)  # every event
    if not stream:
        usage = r.json()["usage"]
    else:
        events = [d for _, d in sse.events(r.text)]
        usage = {**events[0]["message"]["usage"], **next(e for e in events if e["type"] == "message_delta")["usage"]}
    total = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    return {"prompt_tokens": total, **usage}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_protocol_answers_a_picture_and_counts_its_image_tokens(
    live: LiveServer, protocol: str, stream: bool
) -> None:
    color = (PROTOCOLS.index(protocol) * 40 + 20, 90 if stream else 150, 30)
    data = png(color)
    tokens = model_tokens(live, color)
    assert len(image_positions(tokens)) == 12  # what the model sees holds the picture's image tokens
    assert count(live, protocol, data) == len(tokens)
    usage = send(live, protocol, data, stream)
    assert usage["prompt_tokens"] == len(tokens), usage


def test_count_tokens_counts_the_image_tokens(live: LiveServer) -> None:
    text_only = {"model": live.engine.info.id, "input": [{"role": "user", "content": QUESTION}]}
    r = httpx.post(live.v1 + "/responses/input_tokens", json=text_only, timeout=60)
    assert r.status_code == 200, r.text
    with_image = count(live, "responses", png((1, 2, 3)))
    assert with_image - r.json()["input_tokens"] >= 12  # the image tokens and their markers
    assert count(live, "messages", png((1, 2, 3))) == with_image


# -- the SDKs -------------------------------------------------------------------------------------


def test_the_openai_sdk_sends_a_picture(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=live.v1, api_key="unused", max_retries=0)
    data = png((9, 9, 200))
    expected = len(model_tokens(live, (9, 9, 200)))
    messages: Any = [{"role": "user", "content": content("chat", data)}]
    completion = client.chat.completions.create(model=live.engine.info.id, max_tokens=3, messages=messages)
    assert completion.usage is not None and completion.usage.prompt_tokens == expected
    items: Any = [{"role": "user", "content": content("responses", data)}]
    response = client.responses.create(model=live.engine.info.id, max_output_tokens=3, input=items)
    assert response.usage is not None and response.usage.input_tokens == expected
    assert response.usage.input_tokens_details.cached_tokens > image_positions(model_tokens(live, (9, 9, 200)))[-1]


def test_the_anthropic_sdk_sends_a_picture(live: LiveServer) -> None:
    client = anthropic.Anthropic(base_url=live.url, api_key="unused", max_retries=0)
    color = (200, 9, 200)
    expected = len(model_tokens(live, color))
    blocks: Any = content("messages", png(color))
    counted = client.messages.count_tokens(model=live.engine.info.id, messages=[{"role": "user", "content": blocks}])
    assert counted.input_tokens == expected
    message = client.messages.create(
        model=live.engine.info.id, max_tokens=3, messages=[{"role": "user", "content": blocks}]
    )
    usage = message.usage
    assert usage.input_tokens + (usage.cache_read_input_tokens or 0) == expected
    with client.messages.stream(
        model=live.engine.info.id, max_tokens=3, messages=[{"role": "user", "content": blocks}]
    ) as stream:
        streamed = stream.get_final_message().usage
    assert streamed.input_tokens + (streamed.cache_read_input_tokens or 0) == expected
    assert (streamed.cache_read_input_tokens or 0) > image_positions(model_tokens(live, color))[-1]  # seen before


# -- the prompt cache over the wire ---------------------------------------------------------------


def greedy(live: LiveServer, data: bytes) -> tuple[str, dict[str, Any]]:
    """A greedy Chat Completions answer to ``QUESTION`` and the picture: its text and usage."""
    fields = {"max_tokens": 8, "temperature": 0}
    r = httpx.post(live.v1 + "/chat/completions", json=body(live, "chat", data, **fields), timeout=300)
    assert r.status_code == 200, r.text
    completion = ChatCompletion.model_validate(r.json(), strict=True)
    assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
    return completion.choices[0].message.content or "", completion.usage.model_dump()


def test_the_same_picture_twice_reads_its_image_tokens_from_the_cache(live: LiveServer) -> None:
    color = (17, 170, 70)
    positions = image_positions(model_tokens(live, color))
    fresh, first = greedy(live, png(color))
    assert first["prompt_tokens_details"]["cached_tokens"] <= positions[0]  # a new picture: no hit on it
    cached, second = greedy(live, png(color))
    assert second["prompt_tokens_details"]["cached_tokens"] > positions[-1], second
    assert cached == fresh  # the cached image tokens are the picture's own: the same greedy answer
    third = send(live, "messages", png(color), stream=True)
    assert third["cache_read_input_tokens"] > positions[-1], third


def test_a_different_picture_with_the_same_text_hits_no_further_than_its_first_image_token(
    live: LiveServer,
) -> None:
    before, after = (70, 17, 170), (70, 18, 170)  # one step apart in one channel: different bytes
    send(live, "chat", png(before), stream=False)
    positions = image_positions(model_tokens(live, after))
    assert positions == image_positions(model_tokens(live, before))  # the same text, the same layout
    usage = send(live, "chat", png(after), stream=False)
    assert usage["prompt_tokens_details"]["cached_tokens"] <= positions[0], usage
    messages = send(live, "messages", png((70, 19, 170)), stream=False)
    assert messages["cache_read_input_tokens"] <= positions[0], messages
