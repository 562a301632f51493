"""``POST /v1/responses/input_tokens`` (issue 36 item 5): the input tokens a create body would cost,
counted as a create counts them, with the create's refusals."""

from __future__ import annotations

from typing import Any

import httpx

from .support import MODEL

TOOL = {"type": "function", "name": "read", "description": "Read a file.", "parameters": {"type": "object"}}


def count(server: Any, **body: Any) -> httpx.Response:
    return httpx.post(server.v1 + "/responses/input_tokens", json={"model": MODEL, **body}, timeout=30)


def test_the_count_is_what_the_response_costs(server: Any) -> None:
    body = {"input": "hi", "instructions": "Be brief.", "tools": [TOOL]}
    counted = count(server, **body)
    assert counted.status_code == 200, counted.text
    assert counted.json() == {"object": "response.input_tokens", "input_tokens": counted.json()["input_tokens"]}
    created = httpx.post(server.v1 + "/responses", json={"model": MODEL, **body}, timeout=30).json()
    assert counted.json()["input_tokens"] == created["usage"]["input_tokens"]
    # instructions and tools are part of the prompt; a continuation counts the conversation before it
    bare = count(server, input="hi").json()["input_tokens"]
    assert bare < counted.json()["input_tokens"]
    follow = count(server, input="again", previous_response_id=created["id"]).json()["input_tokens"]
    assert follow > count(server, input="again").json()["input_tokens"]


def test_the_creates_refusals(server: Any) -> None:
    image = [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]
    refused = count(server, input=image)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsupported_content"
    assert count(server, input="hi", previous_response_id="resp_missing").status_code == 404
    unknown = httpx.post(server.v1 + "/responses/input_tokens", json={"model": "gpt-5", "input": "hi"}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert count(server, input="hi", reasoning={"effort": "ultra"}).json()["error"]["param"] == "reasoning.effort"
