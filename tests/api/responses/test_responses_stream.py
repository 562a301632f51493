"""The event grammar (reference §9), checked on the pure encoder over hand-made event iterators,
and once over a real socket for a failure mid-stream."""

from __future__ import annotations

from typing import Any

import httpx

from tinytitan.api.responses.encode import OutputBuilder, ResponsesStream, response_shell
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.engine.errors import GenerationFailed
from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.request import Sampling
from tinytitan.testing import sse
from tinytitan.testing.events import as_sent, encoded
from tinytitan.testing.responses_events import check_stream
from tinytitan.testing.wire_schemas import check_open_responses

from .support import MODEL

USAGE = Usage(prompt_tokens=10, cached_tokens=2, completion_tokens=7, reasoning_tokens=3)

REASONING = [
    "response.output_item.added",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
    "response.output_item.done",
]
MESSAGE = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]
CALL = [
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
]


def _encode(items: list[Any]) -> list[dict[str, Any]]:
    shell = response_shell(ResponsesRequest(model=MODEL), model=MODEL, sampling=Sampling(0.6, 0.95), store=True)

    out = [frame.data for frame in encoded(items, ResponsesStream(OutputBuilder(shell), lambda _r: None))]
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    assert [e["type"] for e in out[:2]] == ["response.created", "response.in_progress"]
    assert out[0]["response"]["status"] == "in_progress" and out[0]["response"]["output"] == []
    check_stream(out)  # the grammar, and every event against the Open Responses schema
    return out


def test_text_only() -> None:
    out = _encode([TextDelta("Hel"), TextDelta("lo"), Finished("stop", USAGE)])
    assert [e["type"] for e in out[2:]] == [*MESSAGE, "response.completed"]
    final = out[-1]["response"]
    assert final["status"] == "completed" and final["output"][0]["content"][0]["text"] == "Hello"
    assert out[2]["item"]["status"] == "in_progress" and out[2]["item"]["content"] == []
    assert final["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 17,
    }


def test_reasoning_then_text() -> None:
    out = _encode([ReasoningDelta("a"), ReasoningDelta("b"), TextDelta("x"), TextDelta("y"), Finished("stop")])
    assert [e["type"] for e in out[2:]] == [*REASONING, *MESSAGE, "response.completed"]
    reasoning, _message = out[-1]["response"]["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "ab"}]
    assert [e["output_index"] for e in out[2:-1]] == [0] * len(REASONING) + [1] * len(MESSAGE)


def test_text_then_two_calls() -> None:
    calls = [ToolCall("call_1", "read", '{"path": "/a"}'), ToolCall("call_2", "read", '{"path": "/b"}', "fs")]
    out = _encode([TextDelta("Go"), TextDelta("."), *calls, Finished("tool_calls")])
    assert [e["type"] for e in out[2:]] == [*MESSAGE, *CALL, *CALL, "response.completed"]
    added = [e for e in out if e["type"] == "response.output_item.added"]
    assert added[1]["item"]["arguments"] == "" and added[1]["item"]["status"] == "in_progress"
    done = [e for e in out if e["type"] == "response.function_call_arguments.done"]
    assert [d["arguments"] for d in done] == ['{"path": "/a"}', '{"path": "/b"}']
    output = out[-1]["response"]["output"]
    assert [o["type"] for o in output] == ["message", "function_call", "function_call"]
    assert "namespace" not in output[1] and output[2]["namespace"] == "fs"
    assert output[2]["call_id"] == "call_2" and output[2]["status"] == "completed"


def test_length_gives_incomplete() -> None:
    out = _encode([TextDelta("a"), Finished("length")])
    assert out[-1]["type"] == "response.incomplete"
    assert out[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    # the item the cap cut is incomplete too, in its done event and in the final object
    done = [e["item"] for e in out if e["type"] == "response.output_item.done"]
    assert [item["status"] for item in done] == ["incomplete"]
    assert out[-1]["response"]["output"][-1]["status"] == "incomplete"


def test_failure_mid_stream_ends_with_response_failed() -> None:
    out = _encode([TextDelta("a"), GenerationFailed()])
    assert [e["type"] for e in out[2:]] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.failed",
    ]
    failed = out[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "generation failed"}


def test_failure_mid_stream_over_http(server: Any) -> None:
    body = {"model": MODEL, "input": "explode", "stream": True}
    with httpx.stream("POST", server.v1 + "/responses", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse.events(response.iter_lines())
    assert all(name == data["type"] for name, data in events)
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert events[-1][0] == "response.failed"
    assert events[-1][1]["response"]["error"]["code"] == "server_error"  # a code the Responses schema allows
    check_stream([data for _, data in events])
    deltas = [data["delta"] for name, data in events if name == "response.output_text.delta"]
    # the three chunks before the failure: one delta each, or fewer (the same text) when the stream lagged
    assert "".join(deltas) == "one two three" and 1 <= len(deltas) <= 3


def test_echoed_tools_are_the_function_tools_the_model_had() -> None:
    """The schema's ``tools`` are those "available to the model", function tools only, each with
    description, parameters and strict (null when unset): a namespace's functions are listed
    flattened, as the prompt has them; hosted tools (never in the prompt) are not listed."""
    wire = ResponsesRequest(
        model=MODEL,
        tools=[
            {"type": "function", "name": "f"},
            {"type": "function", "name": "g", "description": "G.", "strict": False, "parameters": {"type": "object"}},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "h"}]},
            {"type": "web_search"},
        ],
    )
    response = as_sent(response_shell(wire, model=MODEL, sampling=Sampling(), store=False))
    check_open_responses(response, "ResponseResource")
    assert response["tools"] == [
        {"type": "function", "name": "f", "description": None, "parameters": None, "strict": None},
        wire.tools[1] if wire.tools else None,
        {"type": "function", "name": "h", "description": None, "parameters": None, "strict": None},
    ]
