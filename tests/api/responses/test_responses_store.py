"""Storage routes (reference §9 "Storage"): retrieve, delete, cancel, input_items paging, references."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import msgspec
import pytest

from tinytitan.api.openapi import openapi_document
from tinytitan.api.responses.items import InputItem, InputMessageItem, OutputTextPart
from tinytitan.api.responses.mapping import map_items
from tinytitan.api.responses.protocol import ResponsesRequest
from tinytitan.api.responses.shell import response_shell
from tinytitan.api.responses.store import ResponseStore, StoredResponse, as_input
from tinytitan.api.responses.wire import (
    CompactionItem,
    FunctionCallItem,
    InputText,
    MessageItem,
    OutputItem,
    OutputText,
    ReasoningItem,
    Response,
    SummaryText,
)
from tinytitan.api.wire import kind
from tinytitan.engine.request import Sampling
from tinytitan.testing.wire_schemas import check_open_responses

from .support import MODEL


def _post(server: Any, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(server.v1 + "/responses", json={"model": MODEL, **body}, timeout=30)
    if response.status_code == 200:
        check_open_responses(response.json(), "ResponseResource")
    return response


def test_retrieve_delete_and_cancel(server: Any) -> None:
    created = _post(server, {"input": "hi"}).json()
    url = f"{server.v1}/responses/{created['id']}"
    assert httpx.get(url).json() == created
    cancel = httpx.post(url + "/cancel")
    assert cancel.status_code == 400
    assert cancel.json()["error"]["message"] == "Only responses created with background=true can be cancelled."
    assert httpx.delete(url).json() == {"id": created["id"], "object": "response", "deleted": True}


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", ""), ("DELETE", ""), ("POST", "/cancel"), ("GET", "/input_items")]
)
def test_a_deleted_response_is_gone_everywhere(server: Any, method: str, suffix: str) -> None:
    created = _post(server, {"input": "hi"}).json()
    url = f"{server.v1}/responses/{created['id']}"
    assert httpx.delete(url).status_code == 200
    response = httpx.request(method, url + suffix)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_store_false_keeps_nothing(server: Any) -> None:
    created = _post(server, {"input": "hi", "store": False}).json()
    assert created["store"] is False
    assert httpx.get(f"{server.v1}/responses/{created['id']}").status_code == 404
    follow = _post(server, {"input": "more", "previous_response_id": created["id"]})
    assert follow.status_code == 404
    assert follow.json()["error"] == {
        "message": f"Previous response with id '{created['id']}' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "not_found",
    }


def test_streamed_response_is_stored(client: Any) -> None:
    events = list(client.responses.create(model=MODEL, input="hi", stream=True))
    final = events[-1].response
    assert client.responses.retrieve(final.id).output_text == "hello from tinytitan"


def test_input_items_paging(client: Any, server: Any) -> None:
    items = [{"type": "message", "id": f"msg_{i}", "role": "user", "content": f"m{i}"} for i in range(5)]
    created = client.responses.create(model=MODEL, input=items)
    url = f"{server.v1}/responses/{created.id}/input_items"
    page = httpx.get(url).json()
    assert page["object"] == "list" and page["has_more"] is False
    assert [d["id"] for d in page["data"]] == ["msg_4", "msg_3", "msg_2", "msg_1", "msg_0"]  # desc by default
    assert page["first_id"] == "msg_4" and page["last_id"] == "msg_0"
    asc = httpx.get(url, params={"order": "asc", "limit": 2}).json()
    assert [d["id"] for d in asc["data"]] == ["msg_0", "msg_1"] and asc["has_more"] is True
    rest = httpx.get(url, params={"order": "asc", "limit": 2, "after": "msg_1"}).json()
    assert [d["id"] for d in rest["data"]] == ["msg_2", "msg_3"] and rest["has_more"] is True
    last = httpx.get(url, params={"order": "asc", "after": "msg_3"}).json()
    assert [d["id"] for d in last["data"]] == ["msg_4"] and last["has_more"] is False
    assert last["data"][0]["content"] == [{"type": "input_text", "text": "m4"}]
    assert httpx.get(url, params={"limit": 101}).status_code == 400
    assert httpx.get(url, params={"order": "sideways"}).status_code == 400
    sdk = client.responses.input_items.list(created.id, order="asc", limit=3)
    assert [d.id for d in sdk.data] == ["msg_0", "msg_1", "msg_2"]
    string_input = client.responses.create(model=MODEL, input="plain")
    only = httpx.get(f"{server.v1}/responses/{string_input.id}/input_items").json()["data"]
    assert only[0]["id"].startswith("msg_") and only[0]["role"] == "user"


def test_item_reference_resolves_against_the_store(client: Any, server: Any) -> None:
    first = client.responses.create(model=MODEL, input="hi")
    message_id = first.output[-1].id
    client.responses.create(
        model=MODEL,
        input=[
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "item_reference", "id": message_id},
            {"type": "message", "role": "user", "content": "again"},
        ],
    )
    assert [m["content"] for m in server.recorded[-1]["messages"]] == ["hi", "hello from tinytitan", "again"]
    missing = _post(server, {"input": [{"type": "item_reference", "id": "msg_nope"}]})
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "item_not_found"
    assert missing.json()["error"]["param"] == "input[0].id"


def test_previous_response_chain_prepends_the_whole_conversation(client: Any, server: Any) -> None:
    one = client.responses.create(model=MODEL, input="first", instructions="Only this turn.")
    two = client.responses.create(model=MODEL, input="second", previous_response_id=one.id)
    client.responses.create(model=MODEL, input="third", previous_response_id=two.id)
    sent = server.recorded[-1]
    assert [m["content"] for m in sent["messages"]] == [
        "first",
        "hello from tinytitan",
        "second",
        "hello from tinytitan",
        "third",
    ]
    assert sent["system"] is None  # instructions are not carried over, as in the API


def _finished(i: int, *, store: bool = True, status: str = "completed") -> Response:
    shell = response_shell(ResponsesRequest(model=MODEL, input="q"), model=MODEL, sampling=Sampling(), store=store)
    answer = MessageItem(id=f"msg_{i}", status="completed", content=[OutputText(f"answer {i}")])
    return msgspec.structs.replace(shell, id=f"resp_{i}", status=status, output=[answer])


def _question(i: int) -> InputMessageItem:
    return InputMessageItem(id=f"in_{i}", role="user", content=[InputText(f"question {i}")])


def test_store_keeps_the_newest() -> None:
    store = ResponseStore(limit=3)
    for i in range(5):
        store.remember(_finished(i), [_question(i)], [])
    assert len(store) == 3 and store.get("resp_1") is None and store.get("resp_4") is not None
    answer = InputMessageItem(
        id="msg_3", role="assistant", status="completed", content=[OutputTextPart("answer 3", [], [])]
    )
    assert store.find_item("msg_3") == answer and store.find_item("in_2") == _question(2)
    assert store.find_item("msg_0") is None


def test_only_finished_responses_asked_to_be_stored_are_kept() -> None:
    store = ResponseStore()
    store.remember(_finished(1, store=False), [_question(1)], [])
    store.remember(_finished(2, status="failed"), [_question(2)], [])
    store.remember(_finished(3, status="incomplete"), [_question(3)], [])
    assert [store.get(f"resp_{i}") is not None for i in (1, 2, 3)] == [False, False, True]


def test_a_stored_response_is_typed_and_kept_as_it_stood() -> None:
    response = _finished(2)
    earlier = [_question(0), *as_input_all(_finished(0).output)]
    stored = StoredResponse.of(response, [_question(2)], earlier)
    response.status = "failed"  # what the turn does to its object later is not what was stored
    response.output.append(ReasoningItem("rs_late"))
    assert isinstance(stored.response, Response) and stored.response.status == "completed"
    assert [item.id for item in stored.response.output] == ["msg_2"]
    assert [item.id for item in stored.conversation()] == ["in_0", "msg_0", "in_2", "msg_2"]
    assert all(isinstance(item, InputMessageItem) for item in stored.conversation())
    mapped = map_items(stored.conversation(), param="previous_response_id")  # no JSON read again
    assert [(m.role, m.content) for m in mapped.messages] == [
        ("user", "question 0"),
        ("assistant", "answer 0"),
        ("user", "question 2"),
        ("assistant", "answer 2"),
    ]
    assert mapped.messages[3].source is not None and mapped.messages[3].source.path == "previous_response_id[3]"


OUTPUT_ITEMS = [
    MessageItem(id="msg_1", status="completed", content=[OutputText("hi")]),
    ReasoningItem("rs_1", [SummaryText("thought")]),
    FunctionCallItem(id="fc_1", status="completed", name="f", arguments="{}", call_id="call_1", namespace="ns"),
    FunctionCallItem(id="fc_2", status="completed", name="g", arguments="{}", call_id="call_2"),
    CompactionItem("cmp_1", "payload"),
]


@pytest.mark.parametrize("item", OUTPUT_ITEMS, ids=lambda item: kind(item))
def test_an_output_item_becomes_the_input_item_of_its_type_with_the_same_json(item: OutputItem) -> None:
    turned = as_input(item)
    assert kind(turned) == kind(item) and turned.id == item.id
    assert msgspec.to_builtins(turned) == msgspec.to_builtins(item)


def as_input_all(items: list[OutputItem]) -> list[InputItem]:
    return [as_input(item) for item in items]


SENT: list[dict[str, Any]] = [
    {"type": "message", "id": "msg_a", "role": "user", "content": "plain"},
    {
        "role": "assistant",
        "id": "msg_b",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "a", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "b"},
        ],
    },
    {"type": "reasoning", "id": "rs_c", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]},
    {"type": "function_call", "id": "fc_d", "call_id": "c1", "name": "f", "arguments": "{}", "namespace": "ns"},
    {"type": "function_call_output", "id": "fco_e", "call_id": "c1", "output": [{"type": "input_text", "text": "r"}]},
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
]


def test_input_items_come_back_as_sent_and_match_their_schema(server: Any) -> None:
    created = _post(server, {"input": SENT})
    assert created.status_code == 200, created.text
    url = f"{server.v1}/responses/{created.json()['id']}"
    page = httpx.get(url + "/input_items", params={"order": "asc"}).json()
    expected: list[dict[str, Any]] = [
        {"type": "message", **SENT[0], "content": [{"type": "input_text", "text": "plain"}]}
    ]
    expected += [{"type": "message", **SENT[1]}, *SENT[2:5]]
    assert page["data"][:5] == expected  # fields as sent, ``type`` and ``id`` filled, text made a part
    assert page["data"][5]["id"].startswith("msg_") and page["data"][5]["role"] == "developer"
    schema = openapi_document()
    for path, answer in [
        ("/v1/responses/{response_id}", httpx.get(url)),
        ("/v1/responses/{response_id}/input_items", httpx.get(url + "/input_items")),
    ]:
        documented = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json(), {**documented, "components": schema["components"]})
    from openai.types.responses import Response as SDKResponse

    SDKResponse.model_validate(httpx.get(url).json())


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "message", "role": "user", "content": "hi", "status": 5}, "input[0].status"),
        ({"type": "reasoning", "summary": [{"type": "summary_text", "text": 1}]}, "input[0].summary[0].text"),
        ({"type": "reasoning", "summary": "thought"}, "input[0].summary"),
        ({"type": "compaction", "encrypted_content": 7}, "input[0].encrypted_content"),
    ],
)
def test_an_item_field_of_the_wrong_type_is_refused_by_name(server: Any, item: dict[str, Any], param: str) -> None:
    """Parsed into its struct once: a field no check named before is refused, not stored as sent."""
    response = _post(server, {"input": [item, {"role": "user", "content": "hi"}]})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
