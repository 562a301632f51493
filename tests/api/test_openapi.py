"""The OpenAPI document shows what the create routes answer, from the same structs the encoders build."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tinytitan.api.anthropic import wire as anthropic_wire
from tinytitan.api.chat_completions import wire as chat_wire
from tinytitan.api.openapi import BODY_ROUTES, openapi_document
from tinytitan.api.responses import wire as responses_wire
from tinytitan.api.responses import wire_events as responses_events
from tinytitan.api.responses.items import InputItemList

DOC = openapi_document()
SCHEMAS = DOC["components"]["schemas"]
CREATE = [
    ("/v1/chat/completions", chat_wire.ChatCompletion, chat_wire.STREAM_EVENTS),
    ("/v1/responses", responses_wire.Response, responses_events.STREAM_EVENTS),
    ("/v1/messages", anthropic_wire.Message, anthropic_wire.STREAM_EVENTS),
]


def ref(kind: type) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


def answers(path: str) -> dict[str, Any]:
    content: dict[str, Any] = DOC["paths"][path]["post"]["responses"]["200"]["content"]
    return content


@pytest.mark.parametrize(("path", "answer", "events"), CREATE, ids=[c[0] for c in CREATE])
def test_a_create_route_shows_its_answer_and_its_events(path: str, answer: type, events: tuple[type, ...]) -> None:
    content = answers(path)
    assert content["application/json"]["schema"] == ref(answer)
    streamed = content["text/event-stream"]["schema"]["oneOf"]
    assert [e for e in streamed if "$ref" in e] == [ref(e) for e in events]
    for kind in (answer, *events):
        assert SCHEMAS[kind.__name__]["type"] == "object"


@pytest.mark.parametrize(("path", "answer", "events"), CREATE, ids=[c[0] for c in CREATE])
def test_the_answer_schema_is_the_structs_schema(path: str, answer: type, events: tuple[type, ...]) -> None:
    _, components = msgspec.json.schema_components([answer], ref_template="#/components/schemas/{name}")
    assert SCHEMAS[answer.__name__] == components[answer.__name__]


def test_an_event_schema_names_its_type() -> None:
    delta = SCHEMAS["ContentBlockDelta"]
    assert delta["properties"]["type"] == {"enum": ["content_block_delta"]}
    assert "type" in delta["required"]
    assert SCHEMAS["OutputTextDelta"]["properties"]["type"] == {"enum": ["response.output_text.delta"]}


def test_chat_streams_end_in_done_and_every_route_answers_a_struct() -> None:
    assert {"const": "[DONE]"}.items() <= answers("/v1/chat/completions")["text/event-stream"]["schema"]["oneOf"][
        -1
    ].items()
    for route in BODY_ROUTES:
        assert answers(route.path)["application/json"]["schema"] == ref(route.answer)
        assert ("text/event-stream" in answers(route.path)) == bool(route.events)


def test_the_error_envelopes_come_from_the_structs() -> None:
    openai = SCHEMAS["OpenAIError"]
    assert openai["required"] == ["error"]
    body = SCHEMAS["OpenAIErrorBody"]
    assert set(body["required"]) == {"message", "type", "code"} and "param" in body["properties"]
    assert SCHEMAS["AnthropicError"]["properties"]["type"] == {"enum": ["error"]}
    refusal = DOC["paths"]["/v1/messages"]["post"]["responses"]["4XX"]["content"]["application/json"]["schema"]
    assert refusal == {"$ref": "#/components/schemas/AnthropicError"}


def test_the_stored_response_routes_answer_structs() -> None:
    def ok(path: str) -> dict[str, Any]:
        schema: dict[str, Any] = DOC["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        return schema

    assert ok("/v1/responses/{response_id}") == ref(responses_wire.Response)
    assert ok("/v1/responses/{response_id}/input_items") == ref(InputItemList)
    data = SCHEMAS["InputItemList"]["properties"]["data"]["items"]
    kinds = {SCHEMAS[one["$ref"].rsplit("/", 1)[-1]]["properties"]["type"]["enum"][0] for one in data["anyOf"]}
    assert kinds == {
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "compaction",
        "tool_search_call",
        "tool_search_output",
        "custom_tool_call",
        "custom_tool_call_output",
    }
    query = [p["name"] for p in DOC["paths"]["/v1/responses/{response_id}/input_items"]["get"]["parameters"]]
    assert query == ["response_id", "order", "limit", "after"]
