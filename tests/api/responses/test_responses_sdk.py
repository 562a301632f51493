"""The official ``openai`` SDK against a live server (reference §9): objects, streams, round trips."""

from __future__ import annotations

import json
from typing import Any

from .support import MODEL

WRITE_TOOL = {
    "type": "function",
    "name": "Write",
    "description": "Write a file",
    "parameters": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    },
    "strict": False,
}


def _comparable(response: Any) -> dict[str, Any]:
    """The object without ids and times (which legitimately differ between two calls)."""
    data = response.model_dump(mode="json")
    for key in ("id", "created_at", "completed_at"):
        data.pop(key)
    for item in data["output"]:
        item.pop("id", None)
        item.pop("call_id", None)
        item.pop("parsed_arguments", None)  # the stream helper's parsed view of a function call
        for part in item.get("content") or ():
            part.pop("parsed", None)  # the stream helper's parsed view adds this field
    data["usage"]["input_tokens_details"].pop("cached_tokens")  # the prompt cache warms between the two calls
    return data


def test_object_has_every_field(client: Any) -> None:
    raw = client.responses.with_raw_response.create(model=MODEL, input="hi").http_response.json()
    for key in (
        "id",
        "object",
        "created_at",
        "completed_at",
        "status",
        "background",
        "error",
        "incomplete_details",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "model",
        "output",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt_cache_key",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "truncation",
        "usage",
        "user",
        "metadata",
    ):
        assert key in raw, key
    assert raw["id"].startswith("resp_") and len(raw["id"]) == 37
    assert raw["object"] == "response" and raw["status"] == "completed"
    assert raw["background"] is False and raw["service_tier"] == "default" and raw["truncation"] == "disabled"
    assert raw["temperature"] == 0.3 and raw["top_p"] == 0.9  # the applied (server) defaults, echoed
    assert raw["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    kinds = [item["type"] for item in raw["output"]]
    assert kinds == ["reasoning", "message"]
    assert raw["output"][0]["summary"] == [{"type": "summary_text", "text": "Thinking it over."}]
    assert raw["output"][1]["content"] == [
        {"type": "output_text", "text": "hello from tinytitan", "annotations": [], "logprobs": []}
    ]
    usage = raw["usage"]
    assert usage["input_tokens_details"] == {
        "cached_tokens": usage["input_tokens_details"]["cached_tokens"],
        "cache_write_tokens": 0,
    }
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] < usage["output_tokens"]


def test_stream_helper_final_response_equals_plain_object(client: Any) -> None:
    plain = client.responses.create(model=MODEL, input="hi", temperature=0.2)
    with client.responses.stream(model=MODEL, input="hi", temperature=0.2) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert final.output_text == plain.output_text == "hello from tinytitan"
    assert _comparable(final) == _comparable(plain)


def test_stream_true_iteration_ends_with_the_same_object(client: Any) -> None:
    plain = client.responses.create(model=MODEL, input="write it", tools=[WRITE_TOOL])
    events = list(client.responses.create(model=MODEL, input="write it", tools=[WRITE_TOOL], stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.completed"
    assert _comparable(events[-1].response) == _comparable(plain)


def test_stream_helper_with_tools_equals_plain_object(client: Any, server: Any) -> None:
    plain = client.responses.create(model=MODEL, input="write it", tools=[WRITE_TOOL], store=False)
    with client.responses.stream(model=MODEL, input="write it", tools=[WRITE_TOOL], store=False) as stream:
        done_args = [e.arguments for e in stream if e.type == "response.function_call_arguments.done"]
        final = stream.get_final_response()
    assert _comparable(final) == _comparable(plain)
    call = final.output[-1]
    assert call.type == "function_call" and call.name == "Write" and done_args == [call.arguments]
    # The call streamed through the helper goes back as resent history, the way Codex continues.
    history = [
        {"role": "user", "content": "write it"},
        *[item.model_dump(exclude_none=True) for item in final.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "written"},
    ]
    with client.responses.stream(model=MODEL, input=history, tools=[WRITE_TOOL], store=False) as stream:
        second = stream.get_final_response()
    assert second.output_text == "The file is created." and second.status == "completed"
    sent = server.recorded[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == call.call_id


def test_function_call_round_trip_via_previous_response_id(client: Any, server: Any) -> None:
    first = client.responses.create(model=MODEL, input="please write hello.txt", tools=[WRITE_TOOL])
    call = first.output[-1]
    assert call.type == "function_call" and call.name == "Write" and call.status == "completed"
    assert json.loads(call.arguments) == {"file_path": "/abs/hello.txt", "content": "hi"}
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "ok"}],
        tools=[WRITE_TOOL],
    )
    assert second.output_text == "The file is created."
    assert second.previous_response_id == first.id
    sent = server.recorded[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id and sent[2]["content"] == "ok"


def test_function_call_round_trip_via_resent_history(client: Any, server: Any) -> None:
    history = [
        {
            "type": "message",
            "id": "msg_0b7f4f0e-8a3c-4f8e-9d56-1f2a3b4c5d6e",
            "role": "user",
            "content": [{"type": "input_text", "text": "please write hello.txt"}],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": None,
        },
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Writing.", "annotations": [], "logprobs": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "Write",
            "arguments": '{"file_path": "/abs/hello.txt"}',
            "status": "completed",
        },
        {
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": "written"}],
            "id": "fco_0b7f4f0e-8a3c-4f8e-9d56-1f2a3b4c5d6e",
        },  # no type: inferred
    ]
    response = client.responses.create(model=MODEL, input=history, tools=[WRITE_TOOL], store=False)
    assert response.output_text == "The file is created."
    sent = server.recorded[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["content"] == "Writing." and sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[2]["content"] == "written"


def test_namespace_tool_call_carries_namespace(client: Any, server: Any) -> None:
    tools = [
        {
            "type": "namespace",
            "name": "crm",
            "description": "CRM",
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
        }
    ]
    response = client.responses.create(model=MODEL, input="lookup x", tools=tools)
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "lookup" and call.namespace == "crm"
    assert server.recorded[-1]["tools"] == [
        {"name": "lookup", "namespace": "crm", "parameters": {"type": "object", "properties": {}}}
    ]
    stored = client.responses.retrieve(response.id)
    assert stored.output[-1].namespace == "crm"
    # the tools the model had: the namespace's functions, flattened as the prompt has them
    assert [(t.type, t.name) for t in stored.tools] == [("function", "lookup")]
    streamed = list(client.responses.create(model=MODEL, input="lookup x", tools=tools, stream=True))
    done = [e for e in streamed if e.type == "response.output_item.done" and e.item.type == "function_call"]
    assert done and done[0].item.namespace == "crm"
    assert streamed[-1].response.output[-1].namespace == "crm"


def test_codex_shaped_request_is_served(client: Any, server: Any) -> None:
    tools = [
        {
            "type": "function",
            "name": "exec_command",
            "description": "run",
            "strict": False,
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
        {"type": "web_search", "external_web_access": False},
    ]
    stream = client.responses.create(
        model=MODEL,
        input=[
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "base prompt"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context/>"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say hi"}]},
        ],
        tools=tools,
        tool_choice="auto",
        parallel_tool_calls=True,
        reasoning={"summary": "auto"},
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="thread-1",
        stream=True,
        extra_body={"client_metadata": {"x": "y"}},
    )
    events = list(stream)
    final = events[-1].response
    assert events[-1].type == "response.completed" and final.output_text == "hello from tinytitan"
    assert final.usage.input_tokens > 0 and final.store is False and final.prompt_cache_key == "thread-1"
    assert [t.type for t in final.tools] == ["function"]  # web_search never reached the model
    recorded = server.recorded[-1]
    assert [t["name"] for t in recorded["tools"]] == ["exec_command"]  # web_search left out of the prompt
    assert recorded["system"] == "base prompt"


def test_instructions_and_guidance_merge_into_one_system_message(client: Any, server: Any) -> None:
    client.responses.create(
        model=MODEL,
        instructions="Be terse.",
        input=[
            {"role": "system", "content": "System rule."},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "Developer rule."},
        ],
    )
    recorded = server.recorded[-1]
    assert recorded["system"] == "Be terse.\n\nSystem rule.\n\nDeveloper rule."
    assert [m["role"] for m in recorded["messages"]] == ["user"]


def test_text_format_is_normalised_and_echoed(client: Any, server: Any) -> None:
    fmt = {
        "type": "json_schema",
        "name": "answer",
        "strict": True,
        "schema": {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]},
    }
    response = client.responses.create(model=MODEL, input="json please", text={"format": fmt})
    assert json.loads(response.output_text) == {"answer": 42}
    assert response.text.format.type == "json_schema" and response.text.format.name == "answer"
    assert server.recorded[-1]["output_format"] == "json_schema"


def test_reasoning_effort_reaches_the_engine(client: Any, server: Any) -> None:
    client.responses.create(model=MODEL, input="hi", reasoning={"effort": "none"})
    assert server.recorded[-1]["reasoning_level"] == "off"


def test_output_cap_gives_incomplete(client: Any) -> None:
    response = client.responses.create(model=MODEL, input="hi", max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 3
