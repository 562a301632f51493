"""HTTP tests of the Messages routes on a real socket (reference §1, §2, §3, §12)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest

from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing import sse
from tinytitan.testing.messages_events import check_messages_answer
from tinytitan.testing.scripts import script
from tinytitan.testing.server import LiveServer, live_server
from tinytitan.testing.waiting import wait_until
from tinytitan.testing.wire_schemas import check_anthropic

from .support import CONTEXT, MODEL, RULES, WEATHER_TOOL, body

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
REQUEST_ID = re.compile(r"^req_[0-9a-f]{32}$")
Serve = Callable[..., AbstractContextManager[LiveServer]]


def post(server: LiveServer, payload: Any, path: str = "/v1/messages", **kwargs: Any) -> httpx.Response:
    """POST to a Messages route; the answer is checked against Anthropic's documented shapes."""
    response = httpx.post(server.url + path, json=payload, headers=HEADERS, timeout=30, **kwargs)
    check_messages_answer(path, response.status_code, response.headers["content-type"], response.text)
    return response


def test_non_streaming_message(server: LiveServer) -> None:
    response = post(server, body("hi"), path="/v1/messages?beta=true")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert REQUEST_ID.match(response.headers["request-id"])
    assert response.headers["openai-version"] == "2020-10-01"
    message = response.json()
    assert re.match(r"^msg_[0-9a-f]{32}$", message.pop("id"))
    usage = message.pop("usage")
    assert message == {
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "hello from tinytitan"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
    }
    assert usage["cache_creation_input_tokens"] == 0
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] > 0 and usage["output_tokens"] > 0
    assert server.recorded[-1]["stream"] is False


def test_streaming_message_grammar(server: LiveServer) -> None:
    response = post(server, body("please think", stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = sse.events(response.text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    blocks = [d["content_block"]["type"] for e, d in events if e == "content_block_start"]
    assert blocks == ["thinking", "text"]
    thinking = "".join(d["delta"].get("thinking", "") for e, d in events if e == "content_block_delta")
    text = "".join(d["delta"].get("text", "") for e, d in events if e == "content_block_delta")
    assert (thinking.strip(), text) == ("Two plus two.", "The answer is 4.")
    assert {"type": "signature_delta", "signature": ""} in [d["delta"] for e, d in events if "delta" in d]
    assert events[-2][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}


def test_tool_use_round_trip(server: LiveServer) -> None:
    first = post(server, body("what is the weather?", tools=[WEATHER_TOOL])).json()
    assert first["stop_reason"] == "tool_use"
    call = first["content"][-1]
    assert call["type"] == "tool_use" and call["name"] == "get_weather" and call["input"] == {"city": "Paris"}
    assert call["id"].startswith("toolu_")
    second = body(
        tools=[WEATHER_TOOL],
        messages=[
            {"role": "user", "content": "what is the weather?"},
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "sunny"}]},
        ],
    )
    answer = post(server, second).json()
    assert answer["content"] == [{"type": "text", "text": "It is sunny in Paris."}]
    recorded = server.recorded[-1]["messages"]
    assert [m["role"] for m in recorded] == ["user", "assistant", "tool"]
    assert recorded[1]["tool_calls"][0]["id"] == call["id"]
    assert recorded[2] == {"role": "tool", "content": "sunny", "tool_calls": [], "tool_call_id": call["id"]}


def test_stop_sequence_and_max_tokens(server: LiveServer) -> None:
    stopped = post(server, body("count please", stop_sequences=["STOP"])).json()
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "STOP")
    assert stopped["content"][0]["text"] == "one two three "
    capped = post(server, body("count please", max_tokens=2)).json()
    assert (capped["stop_reason"], capped["usage"]["output_tokens"]) == ("max_tokens", 2)


@pytest.mark.parametrize("stream", [False, True], ids=["object", "stream"])
def test_an_answer_the_context_window_cut_says_so(serve: Serve, stream: bool) -> None:
    """Room in the window under ``max_tokens``: an answer cut there is ``model_context_window_exceeded``
    (the API's own stop reason), one cut by ``max_tokens`` stays ``max_tokens``."""
    long = script({"reply": {"text": " ".join(f"w{i}" for i in range(200))}}, context_window=96)
    with serve(long) as server:
        cut = post(server, body("hi", max_tokens=4096, stream=stream))
        capped = post(server, body("hi", max_tokens=3, stream=stream))

    def reason(answer: httpx.Response) -> str:
        if not stream:
            return str(answer.json()["stop_reason"])
        (delta,) = [d for e, d in sse.events(answer.text) if e == "message_delta"]
        return str(delta["delta"]["stop_reason"])

    assert (reason(cut), reason(capped)) == ("model_context_window_exceeded", "max_tokens")


def test_max_tokens_is_clamped_to_the_context_window(server: LiveServer) -> None:
    assert post(server, body(max_tokens=32000)).status_code == 200
    assert server.recorded[-1]["max_new"] < CONTEXT


@pytest.fixture(scope="module")
def leveled() -> Iterator[LiveServer]:
    """A model with a four-step reasoning ladder, medium by default."""
    levels = ["off", "low", "medium", "xhigh"]
    stub = script(*RULES, reasoning_levels=levels, default_reasoning="medium", context_window=65536)
    with live_server(StubBackend(stub)) as server:
        yield server


@pytest.mark.parametrize(
    ("thinking", "level"),
    [
        ({"type": "enabled", "budget_tokens": 2000}, "low"),
        ({"type": "enabled", "budget_tokens": 8000}, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, "xhigh"),
        ({"type": "disabled"}, "off"),
        ({"type": "adaptive"}, "medium"),
    ],
    ids=["budget 2000", "budget 8000", "budget 16384", "disabled", "adaptive"],
)
def test_thinking_levels_reach_the_engine(leveled: LiveServer, thinking: dict[str, Any], level: str) -> None:
    assert post(leveled, body(thinking=thinking, max_tokens=32000)).status_code == 200
    assert leveled.recorded[-1]["reasoning_level"] == level


def test_structured_output_through_output_config(server: LiveServer) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    output_config = {"format": {"type": "json_schema", "schema": schema}}
    message = post(server, body("json please", output_config=output_config))
    assert message.status_code == 200
    assert json.loads(message.json()["content"][0]["text"]) == {"answer": 4}
    assert server.recorded[-1]["output_format"] == "json_schema"
    assert server.recorded[-1]["reasoning_level"] == "off"


def test_failure_mid_stream_is_an_error_event_then_the_end(server: LiveServer) -> None:
    response = post(server, body("fail now", stream=True))
    assert response.status_code == 200
    events = sse.events(response.text)
    assert events[0][0] == "message_start"
    assert events[-1][0] == "error"
    error = events[-1][1]
    assert (error["type"], error["error"]["type"]) == ("error", "api_error")
    assert error["request_id"] == response.headers["request-id"]
    assert "message_stop" not in [e for e, _ in events]


def test_count_tokens(server: LiveServer) -> None:
    payload = body("hello there", tools=[WEATHER_TOOL])
    del payload["max_tokens"]
    with_tools = post(server, payload, path="/v1/messages/count_tokens?beta=true")
    assert with_tools.status_code == 200
    assert REQUEST_ID.match(with_tools.headers["request-id"])
    del payload["tools"]
    without = post(server, payload, path="/v1/messages/count_tokens").json()
    assert set(without) == {"input_tokens"}
    assert with_tools.json()["input_tokens"] > without["input_tokens"] > 0
    assert server.recorded == []  # counting generates nothing


def test_count_tokens_refuses_like_messages(server: LiveServer) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    payload = body([image])
    response = post(server, payload, path="/v1/messages/count_tokens")
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("messages[0].content[0]: model 'stub-model' has no vision input")


def test_count_tokens_without_a_tokenizer_is_501(serve: Serve) -> None:
    with serve(script(*RULES, context_window=CONTEXT, tokenizer=False)) as server:
        response = post(server, body(), path="/v1/messages/count_tokens")
    assert response.status_code == 501
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert error["request_id"] == response.headers["request-id"]


def test_a_full_queue_is_529_overloaded_with_retry_after(serve: Serve) -> None:
    with serve(queue_limit=0) as server, httpx.Client(timeout=30) as client:
        with client.stream(
            "POST", server.url + "/v1/messages", json=body("slow please", stream=True), headers=HEADERS
        ) as running:
            assert running.status_code == 200
            lines = running.iter_lines()  # keep it: dropping the iterator closes the connection
            assert next(lines) == "event: message_start"  # admitted and streaming
            refused = post(server, body("hi"))
        assert refused.status_code == 529
        assert refused.headers["retry-after"].isdigit()
        assert refused.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
        # the slot frees when the client leaves (the server notices the disconnect on its own thread)
        wait_until(lambda: server.engine.queue.running == 0 and server.engine.queue.waiting == 0)
        assert post(server, body("hi")).status_code == 200


@pytest.fixture(scope="module")
def shared() -> Iterator[LiveServer]:
    """One server for the table test below (its requests change nothing)."""
    with live_server(StubBackend(script(*RULES, context_window=CONTEXT))) as server:
        yield server


JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "request_args", "status", "kind"),
    [
        ("POST", "/v1/messages", {"content": b"{not json", "headers": JSON_TYPE}, 400, "invalid_request_error"),
        (
            "POST",
            "/v1/messages",
            {"content": b'{"max_tokens": "many"}', "headers": JSON_TYPE},
            400,
            "invalid_request_error",
        ),
        (
            "POST",
            "/v1/messages",
            {"content": b"hi", "headers": {"content-type": "text/plain"}},
            415,
            "invalid_request_error",
        ),
        ("GET", "/v1/messages", {}, 405, "invalid_request_error"),
        ("POST", "/v1/messages/nope", {"json": {}}, 404, "not_found_error"),
        ("GET", "/v1/models/nope", {"headers": HEADERS}, 404, "not_found_error"),
    ],
    ids=["bad json", "bad field type", "text/plain", "GET messages", "unknown route", "unknown model"],
)
def test_errors_use_the_anthropic_envelope_on_every_anthropic_route(
    shared: LiveServer, method: str, path: str, request_args: dict[str, Any], status: int, kind: str
) -> None:
    response = httpx.request(method, shared.url + path, **request_args)
    assert response.status_code == status, response.text
    error = response.json()
    check_anthropic(error, "ErrorResponse")
    assert set(error) == {"type", "error", "request_id"}
    assert error["type"] == "error" and error["error"]["type"] == kind
    assert error["request_id"] == response.headers["request-id"]


def test_models_in_the_anthropic_shape(server: LiveServer) -> None:
    listing = httpx.get(server.url + "/v1/models", headers=HEADERS).json()
    check_anthropic(listing, "ModelList")
    window = server.engine.info.context_window
    entry = {"type": "model", "id": MODEL, "display_name": MODEL, "created_at": "1970-01-01T00:00:00Z"}
    (model,) = listing["data"]
    capabilities = model.pop("capabilities")
    assert listing == {
        "data": [{**entry, "max_input_tokens": window, "max_tokens": min(32_000, window // 4), "lifecycle": "active"}],
        "has_more": False,
        "first_id": MODEL,
        "last_id": MODEL,
    }
    # every capability the API defines: this server's true answer for the model
    assert capabilities["structured_outputs"] == {"supported": True}
    assert capabilities["image_input"] == capabilities["pdf_input"] == {"supported": False}
    thinking = {"supported": True, "types": {"adaptive": {"supported": True}, "enabled": {"supported": True}}}
    assert capabilities["thinking"] == thinking  # the stub's template has a thinking switch
    assert capabilities["effort"]["supported"] is False
    assert capabilities["server_tools"] == {"supported": True}  # tool search runs here (the stub calls tools)
    one = httpx.get(server.url + f"/v1/models/{MODEL}-fast", headers=HEADERS)
    check_anthropic(one.json(), "ModelInfo")
    assert one.status_code == 200 and one.json()["type"] == "model" and one.json()["id"] == f"{MODEL}-fast"
    assert one.json()["capabilities"] == capabilities
    assert REQUEST_ID.match(one.headers["request-id"])
    openai = httpx.get(server.url + "/v1/models").json()
    assert openai["object"] == "list" and "request-id" not in httpx.get(server.url + "/v1/models").headers


def test_a_slow_stream_is_kept_alive_with_ping_events(serve: Serve) -> None:
    slow = script({"reply": {"text": "late answer", "chunk_delay_ms": 700}}, context_window=CONTEXT)
    with serve(slow, settings=Settings(keepalive_seconds=0.1)) as server:
        response = post(server, body(stream=True))
    events = sse.events(response.text)
    assert ("ping", {"type": "ping"}) in events
    text = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta")
    assert text == "late answer" and events[-1][0] == "message_stop"
