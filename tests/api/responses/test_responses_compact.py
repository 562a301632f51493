"""POST /v1/responses/compact over a live server (reference §11), and the payload sent back."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from openai.types.responses import ResponseInputParam

from tinytitan.engine.passes.compaction import HANDOVER_ASK
from tinytitan.testing.scripts import script
from tinytitan.testing.wire_schemas import check_open_responses

from .support import MODEL

NOTE = "Decisions:\n- chose sqlite over postgres (no server)\nNext step:\n- add the migration in db/001.sql"
INPUT: ResponseInputParam = [
    {"type": "message", "role": "developer", "content": "base prompt"},
    {"type": "message", "role": "user", "content": "Store users somewhere simple."},
    {"type": "message", "role": "assistant", "content": "Using sqlite."},
]


def _script() -> dict[str, Any]:
    return script(
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}},
        {"reply": {"text": "continuing"}},
    )


def test_compact_returns_instructions_and_one_compaction_item(serve: Any) -> None:
    with serve(_script()) as server:
        from openai import OpenAI

        client = OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
        compacted = client.responses.compact(model=MODEL, input=INPUT, instructions="Be helpful.", prompt_cache_key="k")
        assert compacted.object == "response.compaction" and compacted.id.startswith("resp_cmp_")
        first, item = compacted.output
        assert first.type == "message" and first.role == "developer" and first.content[0].text == "Be helpful."
        assert item.type == "compaction" and item.id.startswith("cmp_") and item.created_by == "tinytitan"
        body = json.loads(base64.b64decode(item.encrypted_content))
        assert sorted(body) == ["createdAt", "mode", "model", "read", "summary", "v"]
        assert (body["mode"], body["model"], body["summary"], body["v"]) == ("model", MODEL, NOTE, 1)
        assert body["read"] == "continuation"
        assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0
        # the conversation as the model reads it on a turn: the instructions and guidance lead, the ask follows
        (compaction,) = server.recorded
        assert compaction["system"] == "Be helpful.\n\nbase prompt"
        assert [m["content"] for m in compaction["messages"][:-1]] == ["Store users somewhere simple.", "Using sqlite."]
        assert compaction["messages"][-1]["content"].endswith(HANDOVER_ASK)

        # sent back as the base input of the next response: the note joins the system block
        follow = client.responses.create(
            model=MODEL,
            input=[item.model_dump(exclude_none=True), {"role": "user", "content": "next?"}],
            instructions="Be helpful.",
        )
        assert follow.output_text == "continuing"
        system = server.recorded[-1]["system"]
        assert system.startswith("Be helpful.\n\n") and "compacted" in system and system.endswith(NOTE)

        # a compaction continues a stored response too
        again = client.responses.compact(model=MODEL, previous_response_id=follow.id)
        assert again.output[-1].type == "compaction" and len(again.output) == 1


def test_compact_reads_the_session_as_its_turns_did_so_the_prompt_cache_serves_it(serve: Any) -> None:
    """Issue 40.1: the tools, reasoning and instructions a session's turns sent come with the compact
    call (as Codex sends them), so its prompt begins with the last turn's prompt, token for token."""
    tools = [{"type": "function", "name": "exec", "parameters": {"type": "object", "properties": {}}}]
    session = {"model": MODEL, "instructions": "Be helpful.", "tools": tools, "reasoning": {"effort": "high"}}
    with serve(_script()) as server:
        turn = httpx.post(server.v1 + "/responses", json={**session, "input": INPUT, "store": False}, timeout=30)
        reply = turn.json()["output"]
        done = httpx.post(server.v1 + "/responses/compact", json={**session, "input": [*INPUT, *reply]}, timeout=30)
        assert done.status_code == 200, done.text
        first, compaction = server.recorded
        assert compaction["tools"] == first["tools"] and compaction["system"] == first["system"]
        assert compaction["prompt"].startswith(first["prompt"].removesuffix("<|im_start|>assistant\n"))
        usage = done.json()["usage"]
        assert usage["input_tokens_details"]["cached_tokens"] > 0


def test_the_compaction_object_is_valid_against_the_schema(server: Any) -> None:
    body = {"model": MODEL, "input": INPUT, "instructions": "Be helpful."}
    response = httpx.post(server.v1 + "/responses/compact", json=body, timeout=30)
    assert response.status_code == 200, response.text
    check_open_responses(response.json(), "CompactResource")


def test_compact_refusals(server: Any) -> None:
    url = server.v1 + "/responses/compact"
    missing = httpx.post(url, json={"input": INPUT})
    assert missing.status_code == 400
    assert missing.json()["error"] == {
        "message": "model is required",
        "type": "invalid_request_error",
        "param": "model",
        "code": "invalid_value",
    }
    zero = httpx.post(url, json={"model": MODEL, "input": INPUT, "max_compaction_tokens": 0})
    assert zero.status_code == 400 and zero.json()["error"]["param"] == "max_compaction_tokens"
    empty = httpx.post(url, json={"model": MODEL, "input": [INPUT[0]]})
    assert empty.status_code == 400
    assert empty.json()["error"]["message"] == "nothing to compact: input carries no messages"
    unknown = httpx.post(url, json={"model": "gpt-5", "input": INPUT})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    v2 = base64.b64encode(json.dumps({"v": 2, "summary": "s"}).encode()).decode()
    refused = httpx.post(
        server.v1 + "/responses",
        json={
            "model": MODEL,
            "input": [{"type": "compaction", "encrypted_content": v2}, {"role": "user", "content": "x"}],
        },
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "compaction_payload_version"


def test_the_fast_alias_keeps_the_servers_own_text(serve: Any) -> None:
    """The ``-fast`` strip drops the client's system prompt — never the server's compaction instruction
    (the pass would lose its ask) nor a compaction note sent back as input (the session's memory)."""
    from tinytitan.engine.passes.compaction import HANDOVER_INSTRUCTION

    with serve(_script()) as server:
        done = httpx.post(server.v1 + "/responses/compact", json={"model": MODEL + "-fast", "input": INPUT}, timeout=30)
        assert done.status_code == 200, done.text
        (compaction,) = [r for r in server.recorded if r["strip_cli"]]
        assert compaction["messages"][-1]["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
        assert compaction["tools"] == [] and "base prompt" not in (compaction["system"] or "")

        item = done.json()["output"][-1]
        follow = [*INPUT, item, {"type": "message", "role": "user", "content": "go on"}]
        answered = httpx.post(server.v1 + "/responses", json={"model": MODEL + "-fast", "input": follow}, timeout=30)
        assert answered.status_code == 200, answered.text
        last = server.recorded[-1]
        assert last["strip_cli"] and "sqlite over postgres" in last["system"]
        assert "base prompt" not in last["system"]  # the client's own developer text is still stripped
