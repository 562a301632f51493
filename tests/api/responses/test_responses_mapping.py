"""Input mapping and refusals (reference §9): items, inference, tools, text.format, refusals by name."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tinytitan.api.responses.mapping import map_input, map_tools, to_chat_request
from tinytitan.api.responses.protocol import ResponsesRequest, TextParam
from tinytitan.api.wire import kind
from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.passes.compaction import encode_payload
from tinytitan.engine.request import FormatRequest, ModelInfo
from tinytitan.engine.request.validate import validate
from tinytitan.testing.server import LiveServer
from tinytitan.testing.wire_schemas import check_open_responses

from .support import MODEL


def _none(_id: str) -> None:
    return None


def test_items_without_type_are_inferred() -> None:
    mapped = map_input(
        [
            {"role": "user", "content": "hi"},
            {"name": "f", "arguments": "{}", "call_id": "c1"},
            {"call_id": "c1", "output": "done"},
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
            },
        ],
        resolve=_none,
    )
    assert [(m.role, m.content) for m in mapped.messages] == [
        ("user", "hi"),
        ("assistant", ""),
        ("tool", "done"),
        ("assistant", "ab"),
    ]
    assert mapped.messages[1].tool_calls[0].id == "c1"
    assert [kind(i) for i in mapped.items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert all(i.id for i in mapped.items)


def test_calls_join_the_preceding_assistant_message_and_reasoning_is_skipped() -> None:
    mapped = map_input(
        [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": "ok", "status": "completed"},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}", "namespace": "ns"},
            {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
        ],
        resolve=_none,
    )
    assert [m.role for m in mapped.messages] == ["user", "assistant"]
    calls = mapped.messages[1].tool_calls
    assert [(c.id, c.namespace) for c in calls] == [("a", "ns"), ("b", None)]


def test_a_replayed_thought_reaches_the_assistant_turn_after_it() -> None:
    mapped = map_input(
        [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look it up."}]},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "1"},
            {"type": "function_call_output", "call_id": "b", "output": "2"},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Done."}]},
            {"type": "message", "role": "assistant", "content": "ok"},
        ],
        resolve=_none,
    )
    assistants = [m for m in mapped.messages if m.role == "assistant"]
    assert [(len(m.tool_calls), m.reasoning) for m in assistants] == [(2, "Look it up."), (0, "Done.")]


def test_tools_namespace_flattened_custom_kept_and_hosted_types_left_out() -> None:
    tools = map_tools(
        [
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {
                "type": "namespace",
                "name": "crm",
                "tools": [{"type": "function", "name": "g"}, {"type": "custom", "name": "x"}],
            },
            *(
                {"type": t}
                for t in (
                    "web_search",
                    "file_search",
                    "code_interpreter",
                    "mcp",
                    "image_generation",
                    "computer_use_preview",
                    "shell",
                    "local_shell",
                )
            ),
        ]
    )
    assert [(t.name, t.namespace, t.type) for t in tools] == [
        ("f", None, "function"),
        ("g", "crm", "function"),
        ("x", "crm", "custom"),
    ]


def test_text_format_maps_to_a_format_request_in_the_clients_spelling() -> None:
    fmt = {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": True}
    wire = ResponsesRequest(model=MODEL, input="x", text=TextParam(format=fmt))
    chat, _ = to_chat_request(wire, history=[], resolve=_none)
    assert chat.output_format == FormatRequest(
        "json_schema", "text.format", "text.format.schema", schema={"type": "object"}, name="n"
    )
    plain = ResponsesRequest(model=MODEL, input="x", text=TextParam(format={"type": "text"}))
    assert to_chat_request(plain, history=[], resolve=_none)[0].output_format is None
    assert (chat.messages_param, chat.cap_param) == ("input", "max_output_tokens")


def test_compaction_item_joins_the_system_block() -> None:
    payload = encode_payload("We chose B over A because of C.", "model", MODEL)
    wire = ResponsesRequest(
        model=MODEL,
        instructions="Rules.",
        input=[
            {"type": "message", "role": "developer", "content": "Dev."},
            {"type": "compaction", "encrypted_content": payload},
            {"role": "user", "content": "continue"},
        ],
    )
    chat, _ = to_chat_request(wire, history=[], resolve=_none)
    client, note = chat.messages[:2]
    assert (client.content, client.server) == ("Rules.\n\nDev.", False)
    assert note.server  # the server's own text: the -fast strip keeps it
    assert [m.role for m in chat.messages] == ["system", "system", "user"]
    system = validate(chat, ModelInfo(MODEL, 4096)).system or ""
    assert system.startswith("Rules.\n\nDev.\n\n")
    assert "compacted" in system and system.endswith("We chose B over A because of C.")


@pytest.mark.parametrize(
    ("item", "code"),
    [
        ({"type": "compaction"}, "invalid_value"),
        ({"type": "compaction", "encrypted_content": "not base64!!"}, "compaction_payload_invalid"),
        ({"type": "compaction", "encrypted_content": "eyJ2IjogMn0="}, "compaction_payload_invalid"),
    ],
)
def test_bad_compaction_items_are_refused(item: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        map_input([item], resolve=_none)
    assert info.value.code == code


def test_other_payload_version_is_refused() -> None:
    import base64
    import json

    payload = base64.b64encode(json.dumps({"v": 2, "summary": "s"}).encode()).decode()
    with pytest.raises(InvalidRequest) as info:
        map_input([{"type": "compaction", "encrypted_content": payload}], resolve=_none)
    assert info.value.code == "compaction_payload_version"
    assert info.value.param == "input[0].encrypted_content"


@pytest.mark.parametrize(
    ("extra", "param", "code"),
    [
        ({"background": True}, "background", "unsupported_value"),
        ({"top_logprobs": 2}, "top_logprobs", "unsupported_value"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt", "unsupported_value"),
        ({"conversation": "conv_1"}, "conversation", "unsupported_value"),
        (
            {"include": ["reasoning.encrypted_content", "file_search_call.results"]},
            "include[1]",
            "unsupported_value",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]",
            "unsupported_content",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0]",
            "unsupported_content",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]},
            "input[0].call_id",
            "invalid_tool_result",
        ),
        ({"input": [{"foo": 1}]}, "input[0].type", "invalid_value"),
        ({"max_output_tokens": 0}, "max_output_tokens", "invalid_value"),
        (
            {"tool_choice": "required", "tools": [{"type": "function", "name": "f"}]},
            "tool_choice",
            "unsupported_value",
        ),
        ({"tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name", "invalid_tool_name"),
        ({"model": None}, "model", "invalid_value"),
        # values the Responses API defines only as an enum (what a response echoes must be one of them)
        ({"reasoning": {"effort": "ultra"}}, "reasoning.effort", "unsupported_value"),
        ({"reasoning": {"summary": "verbose"}}, "reasoning.summary", "unsupported_value"),
        ({"text": {"verbosity": "extreme"}}, "text.verbosity", "unsupported_value"),
        ({"truncation": "sometimes"}, "truncation", "unsupported_value"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name", "invalid_value"),
    ],
)
def test_refusals_by_name(server: Any, extra: dict[str, Any], param: str, code: str) -> None:
    body = {"model": MODEL, "input": "hi", **extra}
    response = httpx.post(server.v1 + "/responses", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, code)


def test_unknown_model_and_bad_json(server: Any) -> None:
    response = httpx.post(server.v1 + "/responses", json={"model": "gpt-5", "input": "hi"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"
    response = httpx.post(server.v1 + "/responses", content=b"{", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_errors_name_the_input_item(server: LiveServer) -> None:
    """A tool output answering nothing is named by its own input item and field."""
    body = {
        "model": MODEL,
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "call_missing", "output": "r"},
        ],
    }
    error = httpx.post(server.v1 + "/responses", json=body).json()["error"]
    assert (error["code"], error["param"]) == ("invalid_tool_result", "input[1].call_id")


@pytest.mark.parametrize(("effort", "echoed"), [("xhigh", "xhigh"), ("none", "none"), ("minimal", "low")])
def test_the_echoed_effort_is_one_the_schema_allows(server: LiveServer, effort: str, echoed: str) -> None:
    """OpenAI's ``minimal`` is served (the nearest rendered level, as any effort) and echoed as the
    nearest effort the Open Responses schema allows; the object is valid against that schema."""
    body = {"model": MODEL, "input": "hi", "reasoning": {"effort": effort}}
    response = httpx.post(server.v1 + "/responses", json=body, timeout=30)
    assert response.status_code == 200, response.text
    check_open_responses(response.json(), "ResponseResource")
    assert response.json()["reasoning"]["effort"] == echoed
