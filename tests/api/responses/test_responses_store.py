"""Storage routes (reference §9 "Storage"): retrieve, delete, cancel, input_items paging, references."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tinytitan.api.responses.store import ResponseStore, StoredResponse
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


def test_store_keeps_the_newest() -> None:
    store = ResponseStore(limit=3)
    for i in range(5):
        store.put(StoredResponse({"id": f"resp_{i}", "output": [{"id": f"msg_{i}"}]}, [{"id": f"in_{i}"}], []))
    assert len(store) == 3 and store.get("resp_1") is None and store.get("resp_4") is not None
    assert store.find_item("msg_3") == {"id": "msg_3"} and store.find_item("in_2") == {"id": "in_2"}
    assert store.find_item("msg_0") is None
