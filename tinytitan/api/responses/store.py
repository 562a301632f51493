"""Stored responses (reference §9 "Storage"): the newest finished responses, in memory.

A stored response keeps its object, the input items of its own request, and the whole conversation
it continued from, so ``previous_response_id`` can prepend ``history + output`` (output items are
valid input items as they are: message, function_call, reasoning).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tinytitan.engine.errors import InvalidRequest, NotFound

__all__ = ["DEFAULT_LIMIT", "ResponseStore", "StoredResponse", "page"]

DEFAULT_LIMIT = 256
_STORED_STATUSES = ("completed", "incomplete")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]  # this request's items, normalised (ids filled)
    history: list[dict[str, Any]]  # every item the model saw before its output (previous turns + input)

    @property
    def id(self) -> str:
        return str(self.response["id"])

    def conversation(self) -> list[dict[str, Any]]:
        """What a continuation prepends: the history, then this response's output as input items."""
        return [*self.history, *self.response.get("output", [])]


class ResponseStore:
    """An LRU-by-insertion map of the newest ``limit`` stored responses."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, stored: StoredResponse) -> None:
        self._items[stored.id] = stored
        self._items.move_to_end(stored.id)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        return self._items.get(response_id)

    def stored(self, response_id: str, *, param: str = "response_id") -> StoredResponse:
        """The stored response, or 404 naming the id (``previous_response_id`` says "Previous …")."""
        found = self._items.get(response_id)
        if found is None:
            what = "Previous response" if param == "previous_response_id" else "Response"
            raise NotFound(f"{what} with id '{response_id}' not found.", param=param)
        return found

    def remember(
        self, response: dict[str, Any], input_items: list[dict[str, Any]], history: list[dict[str, Any]]
    ) -> None:
        """Keep a finished response asked to be stored (``store`` true; completed or incomplete)."""
        if response.get("store") and response.get("status") in _STORED_STATUSES:
            self.put(StoredResponse(response, input_items, [*history, *input_items]))

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None

    def find_item(self, item_id: str) -> dict[str, Any] | None:
        """An input or output item of any stored response, by its id (for ``item_reference``)."""
        for stored in reversed(self._items.values()):
            items: list[dict[str, Any]] = [*stored.input_items, *stored.response.get("output", [])]
            for item in items:
                if item.get("id") == item_id:
                    return item
        return None


def page(items: list[dict[str, Any]], *, order: str, limit: int, after: str | None) -> dict[str, Any]:
    """A list page of input items (``order`` asc|desc, ``limit`` 1–100, ``after`` an item id)."""
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
    if not 1 <= limit <= 100:
        raise InvalidRequest(f"limit must be between 1 and 100, got {limit}", param="limit")
    ordered = list(items if order == "asc" else reversed(items))
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise InvalidRequest(f"no input item with id '{after}' in this response", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[:limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(ordered) > limit,
    }
