"""Codex's remote compaction v2 against the server (issue 29 item 3).

Codex compacts remotely only when its provider is named "OpenAI": past
``model_auto_compact_token_limit`` it sends the conversation with ``{"type": "compaction_trigger"}``
as the last input item and needs exactly one ``compaction`` output item back; the next request
starts from that item. Here the first turn's usage (Codex's ~17k-character base prompt) is past a
3,000-token limit, so the second turn (``codex exec resume --last``) compacts first — over HTTP and
over the WebSocket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tinytitan.engine.passes.compaction import HANDOVER_ASK, HANDOVER_INSTRUCTION

if TYPE_CHECKING:
    from .conftest import Codex, StartStub

NOTE = "Requirements:\n- remember the word PLOVER\nNext step:\n- answer the next question"
SCRIPT = {
    "rules": [
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}},
        {"reply": {"text": "noted"}},
    ]
}
LIMITS = ("-c", "model_auto_compact_token_limit=3000", "-c", "model_context_window=32768")


@pytest.mark.parametrize("websockets", [False, True], ids=["http", "websocket"])
def test_codex_compacts_in_band_past_its_threshold(stub: StartStub, codex: Codex, websockets: bool) -> None:
    server = stub(SCRIPT)
    keys: dict[str, str | int | bool] = {"name": "OpenAI", "supports_websockets": websockets}
    first = codex.run(server, "remember PLOVER", *LIMITS, provider_keys=keys)
    assert first.returncode == 0 and first.stdout.strip() == "noted", first.describe()
    second = codex.run(server, "what was the word?", *LIMITS, provider_keys=keys, resume=True)
    assert second.returncode == 0 and second.stdout.strip() == "noted", second.describe()

    turn, compaction, after = server.requests()
    assert turn["messages"][-1]["content"] == "remember PLOVER" and "PLOVER" not in turn["system"]
    # the trigger ran the compaction machinery: its handover pass, the first turn read as the model read
    # it (Codex's own system text and tools) with the ask as the next user turn — a prompt that begins
    # with the first turn's, so the prompt cache serves it
    assert compaction["system"] == turn["system"] and compaction["tools"] == turn["tools"]
    assert compaction["messages"][-1]["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
    assert compaction["messages"][: len(turn["messages"])] == turn["messages"]
    assert compaction["prompt"].startswith(turn["prompt"].removesuffix("<|im_start|>assistant\n"))
    # Codex took the one compaction item and sent it back: the note is in the next turn's system block
    assert after["system"].endswith(NOTE)
    assert after["messages"][-1]["content"] == "what was the word?"
    log = server.access_log()
    assert ('"WebSocket /v1/responses" [accepted]' in log) == websockets, log
