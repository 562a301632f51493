"""A strict checker of one Responses event stream (reference §9), whatever carried it (SSE or WebSocket).

``check_stream(events)`` raises ``AssertionError`` naming the first event that breaks a rule:

- every event is valid against the Open Responses schema of its ``type``
  (``tinytitan.testing.wire_schemas``: required fields, their types and enums, the nested response
  object and items) and parses as the official SDK's ``ResponseStreamEvent`` of that type;
- ``sequence_number`` runs 0, 1, 2, … with no gap or repeat;
- ``response.created`` comes first (``queued`` while the request waits for a slot, then
  ``response.queued`` before ``response.in_progress``), exactly one terminal event (``response.completed`` /
  ``incomplete`` / ``failed``) comes last, and every event names the same response id;
- ``response.in_progress`` (the keepalive included) carries a response still ``in_progress``, and
  ``response.queued`` one still ``queued``, never after ``response.in_progress``;
- items open with ``output_item.added`` at the next ``output_index`` and close once with
  ``output_item.done``; part, delta and done events name an item that is open, by its id and index;
- the terminal response's ``output`` is exactly the items the ``output_item.done`` events closed.

It returns the terminal response object.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from tinytitan.testing.wire_schemas import check_responses_event

__all__ = ["TERMINAL", "check_stream"]

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@functools.cache
def _models() -> dict[str, Any]:
    """The SDK's event model of each ``type`` (its union members, keyed by their ``type`` literal)."""
    from openai.types.responses import ResponseStreamEvent

    union = typing.get_args(ResponseStreamEvent)[0]  # Annotated[Union[...], discriminator]
    models: dict[str, Any] = {}
    for model in typing.get_args(union):
        (kind,) = typing.get_args(model.model_fields["type"].annotation)
        models[kind] = model
    return models


def _parse(event: dict[str, Any], where: str) -> None:
    from pydantic import ValidationError

    check_responses_event(event, where)
    model = _models().get(event.get("type", ""))
    assert model is not None, f"{where}: not an event type of the Responses stream"
    try:
        model.model_validate(event)
    except ValidationError as exc:
        raise AssertionError(f"{where}: not a valid {event.get('type')} event: {exc}") from None


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Check ``events`` (one response's whole stream, in order); return the final response object."""
    assert events, "an empty stream"
    kinds = [e.get("type") for e in events]
    assert kinds[0] == "response.created", f"the first event is {kinds[0]}, not response.created"
    terminals = [i for i, kind in enumerate(kinds) if kind in TERMINAL]
    assert terminals == [len(events) - 1], f"one terminal event, last: got {terminals} of {len(events)}"
    response_id = events[0]["response"]["id"]
    started = False
    open_items: dict[int, str] = {}  # output_index → item id
    closed: list[dict[str, Any]] = []
    for n, event in enumerate(events):
        kind = event["type"]
        where = f"event {n} ({kind})"
        _parse(event, where)
        assert event["sequence_number"] == n, f"{where}: sequence_number {event['sequence_number']}, expected {n}"
        if "response" in event:
            assert event["response"]["id"] == response_id, f"{where}: another response id"
        if kind == "response.in_progress":
            assert event["response"]["status"] == "in_progress", f"{where}: status {event['response']['status']}"
            started = True
        if kind == "response.queued":
            assert event["response"]["status"] == "queued", f"{where}: status {event['response']['status']}"
            assert not started, f"{where}: queued after the response was in progress"
        if kind == "response.output_item.added":
            index = event["output_index"]
            assert index == len(closed) + len(open_items), f"{where}: output_index {index} out of order"
            open_items[index] = event["item"]["id"]
        elif kind == "response.output_item.done":
            index = event["output_index"]
            assert open_items.pop(index, None) == event["item"]["id"], f"{where}: closes an item not open"
            closed.append(event["item"])
        elif "item_id" in event:
            index = event["output_index"]
            assert open_items.get(index) == event["item_id"], f"{where}: names item {event['item_id']}, not open"
    final: dict[str, Any] = events[-1]["response"]
    if kinds[-1] != "response.failed":
        assert not open_items, f"items never closed: {sorted(open_items.values())}"
        assert final["output"] == closed, "the final output is not the items the stream closed"
    return final
