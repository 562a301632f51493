"""Stored responses (reference §9 "Storage"): the newest finished responses, in memory, typed.

A stored response keeps its object (the ``wire.Response`` a retrieve answers), the input items of its
own request, the whole conversation it continued from, and its output turned into input items — all
parsed once, so ``previous_response_id`` prepends ``history + output`` without reading JSON again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import msgspec

from tinytitan.engine.errors import InvalidRequest, NotFound

from .items import InputItem, InputItemList
from .wire import OutputItem, Response

__all__ = ["DEFAULT_LIMIT", "ResponseStore", "StoredResponse", "as_input", "finished", "page"]

DEFAULT_LIMIT = 256
_STORED_STATUSES = ("completed", "incomplete")


def as_input(item: OutputItem) -> InputItem:
    """An output item as the input item of the same ``type`` (what a continuation sends back)."""
    parsed: InputItem = msgspec.convert(msgspec.to_builtins(item), InputItem)
    return parsed


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response: Response
    input_items: list[InputItem]  # this request's items (ids filled)
    history: list[InputItem]  # every item the model saw before its output (previous turns + input)
    output_items: list[InputItem]  # the response's output, as input items

    @classmethod
    def of(cls, response: Response, input_items: list[InputItem], history: list[InputItem]) -> StoredResponse:
        """A finished response kept as it stands now (later changes to ``response`` are not seen)."""
        kept = msgspec.structs.replace(response, output=list(response.output))
        return cls(kept, input_items, [*history, *input_items], [as_input(item) for item in response.output])

    @property
    def id(self) -> str:
        return self.response.id

    def conversation(self) -> list[InputItem]:
        """What a continuation prepends: the history, then this response's output as input items."""
        return [*self.history, *self.output_items]


def finished(response: Response, input_items: list[InputItem], history: list[InputItem]) -> StoredResponse | None:
    """What a response that finished (completed or incomplete) leaves to continue from; None otherwise."""
    if response.status not in _STORED_STATUSES:
        return None
    return StoredResponse.of(response, input_items, history)


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

    def remember(self, response: Response, input_items: list[InputItem], history: list[InputItem]) -> None:
        """Keep a finished response asked to be stored (``store`` true; completed or incomplete)."""
        stored = finished(response, input_items, history) if response.store else None
        if stored is not None:
            self.put(stored)

    def delete(self, response_id: str) -> bool:
        return self._items.pop(response_id, None) is not None

    def find_item(self, item_id: str) -> InputItem | None:
        """An input or output item of any stored response, by its id (for ``item_reference``)."""
        for stored in reversed(self._items.values()):
            for item in (*stored.input_items, *stored.output_items):
                if item.id == item_id:
                    return item
        return None


def page(items: list[InputItem], *, order: str, limit: int, after: str | None) -> InputItemList:
    """A list page of input items (``order`` asc|desc, ``limit`` 1–100, ``after`` an item id)."""
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
    if not 1 <= limit <= 100:
        raise InvalidRequest(f"limit must be between 1 and 100, got {limit}", param="limit")
    ordered = list(items if order == "asc" else reversed(items))
    if after is not None:
        ids = [item.id for item in ordered]
        if after not in ids:
            raise InvalidRequest(f"no input item with id '{after}' in this response", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[:limit]
    return InputItemList(
        data=data,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
        has_more=len(ordered) > limit,
    )
