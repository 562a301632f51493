"""A strict checker of one Anthropic Messages event stream (reference §12), as a client reads it.

``check_messages_stream(events)`` takes the ``(event, data)`` pairs of ``tinytitan.testing.sse.events``
and raises ``AssertionError`` naming the first frame that breaks a rule:

- every event is valid against Anthropic's documented shape of its ``type``
  (``tinytitan.testing.wire_schemas``), and its SSE ``event:`` name is that ``type``;
- ``message_start`` comes first; the stream ends with ``message_stop`` — right after the one
  ``message_delta`` — or with an ``error`` event; ``ping`` may come anywhere in between;
- content blocks open at the next ``index`` (0, 1, …), one at a time; deltas name the open block and
  fit its kind (``text_delta`` a text block, ``thinking_delta`` / ``signature_delta`` a thinking
  block, ``input_json_delta`` a tool_use or server_tool_use block, ONE ``compaction_delta`` a
  compaction block; a ``tool_search_tool_result`` block comes whole, with no delta); each
  block stops once, before ``message_delta``.

It returns the pairs it was given, so a test can read on: ``events = check_messages_stream(sse.events(body))``.
"""

from __future__ import annotations

import json
from typing import Any

from tinytitan.testing import sse
from tinytitan.testing.wire_schemas import check_anthropic, check_messages_event

__all__ = ["check_messages_answer", "check_messages_stream"]

_DELTAS = {
    "text": ("text_delta", "citations_delta"),
    "thinking": ("thinking_delta", "signature_delta"),
    "tool_use": ("input_json_delta",),
    "server_tool_use": ("input_json_delta",),
    "compaction": ("compaction_delta",),
}


def check_messages_stream(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    assert events, "an empty stream"
    kinds = [data.get("type") for _, data in events]
    assert kinds[0] == "message_start", f"the first event is {kinds[0]}, not message_start"
    assert kinds[-1] in ("message_stop", "error"), f"the stream ends with {kinds[-1]}, not message_stop or error"
    blocks: list[str] = []  # the kind of each block opened, by index
    open_index: int | None = None
    delta_seen = False
    for n, (name, data) in enumerate(events):
        kind = data.get("type")
        where = f"event {n} ({kind})"
        assert name == kind, f"{where}: sent as 'event: {name}'"
        check_messages_event(data, where)
        assert kind != "message_start" or n == 0, f"{where}: a second message_start"
        assert kind != "error" or n == len(events) - 1, f"{where}: an error that does not end the stream"
        if kind == "content_block_start":
            assert not delta_seen, f"{where}: a block after message_delta"
            assert open_index is None, f"{where}: block {open_index} is still open"
            assert data["index"] == len(blocks), f"{where}: index {data['index']}, expected {len(blocks)}"
            blocks.append(data["content_block"]["type"])
            open_index = data["index"]
        elif kind == "content_block_delta":
            assert open_index is not None and data["index"] == open_index, f"{where}: block {data['index']} not open"
            block, delta = blocks[open_index], data["delta"]["type"]
            assert delta in _DELTAS.get(block, ()), f"{where}: a {delta} in a {block} block"
            assert block != "compaction" or kinds[n - 1] == "content_block_start", f"{where}: a second compaction_delta"
        elif kind == "content_block_stop":
            assert data["index"] == open_index, f"{where}: block {data['index']} is not open"
            open_index = None
        elif kind == "message_delta":
            assert not delta_seen, f"{where}: a second message_delta"
            assert open_index is None, f"{where}: block {open_index} is still open"
            delta_seen = True
        elif kind == "message_stop":
            assert delta_seen, f"{where}: message_stop without a message_delta"
    if kinds[-1] == "message_stop":
        last = [k for k in kinds if k != "ping"]
        assert last[-2:] == ["message_delta", "message_stop"], "message_delta must come right before message_stop"
    return events


def check_messages_answer(path: str, status: int, content_type: str, body: str) -> None:
    """Whatever a Messages route answered, against its documented shape: a stream (every event and
    the grammar above), a message, a token count, or the error envelope."""
    if content_type.startswith("text/event-stream"):
        check_messages_stream(sse.events(body))
        return
    value = json.loads(body)
    if status >= 400:
        check_anthropic(value, "ErrorResponse")
    elif path.split("?", 1)[0].endswith("/count_tokens"):
        check_anthropic(value, "MessageTokensCount")
    else:
        check_anthropic(value, "Message")
