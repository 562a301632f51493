"""The instruction fragment merged into the system message, and its bootstrap listing.

The fragment tells the model what memory is, when to read and write it, what never to store and
that recalled facts may be stale, then lists the workspace's keys with one-line summaries — at most
``BOOTSTRAP_RECORDS`` records and ``BOOTSTRAP_BYTES`` bytes, most important first, the older fact
first among equals.

It is frozen per conversation (``FragmentCache``): the first request of a conversation builds it and
every later request of the same conversation gets the same text, so the rendered prompt prefix —
and the prompt cache behind it — stays valid while the model writes new memories. A conversation
is identified by its scope, the client's system text and its first user turn (``conversation_id``):
every agent resends those unchanged on each turn, and two conversations rarely share both.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from tinytitan.engine.memory.records import Record, summary_line
from tinytitan.engine.memory.store import MemoryStore

__all__ = [
    "BOOTSTRAP_BYTES",
    "BOOTSTRAP_RECORDS",
    "FragmentCache",
    "bootstrap_lines",
    "build_fragment",
    "conversation_id",
]

BOOTSTRAP_RECORDS = 60
BOOTSTRAP_BYTES = 16 * 1024
CACHE_CONVERSATIONS = 512


def conversation_id(scope_key: str, system: str | None, first_user: str | None) -> str:
    digest = hashlib.sha256()
    for part in (scope_key, system or "", first_user or ""):
        digest.update(part.encode("utf-8", errors="surrogatepass"))
        digest.update(b"\x00")
    return "conv_" + digest.hexdigest()[:24]


def bootstrap_lines(records: list[Record]) -> list[str]:
    """One line per record, in the given (ranked) order, within both bootstrap limits."""
    lines: list[str] = []
    used = 0
    for record in records[:BOOTSTRAP_RECORDS]:
        day = time.strftime("%Y-%m-%d", time.gmtime(record.updated))
        line = f"- {record.key} [{record.importance}, {day}]: {summary_line(record.value)}"
        size = len(line.encode()) + 1
        if used + size > BOOTSTRAP_BYTES:
            break
        lines.append(line)
        used += size
    return lines


def _usage(tools: tuple[str, ...]) -> str:
    if not tools:
        return "Memory is read-only here: you cannot save or change it, only use what is listed below.\n"
    find = "memory_list and memory_search find others" if "memory_search" in tools else "memory_list finds others"
    extra = "; memory_append adds a line to one" if "memory_append" in tools else ""
    forget = " or memory_delete it" if "memory_delete" in tools else ""
    return (
        f"Read: memory_get reads an entry in full; {find}. Check memory before asking the user something an "
        "earlier session may have learned.\n"
        "Write: memory_set saves a durable, self-contained fact under a path-like key (project/build-command, "
        f"user/preferences) with an importance from 1 (trivia) to 5 (essential){extra}. Save what a future "
        "session needs: decisions and their reasons, conventions, commands that work, the user's stated "
        "preferences, unfinished work. Update an entry rather than adding a near-duplicate; when one proves "
        f"wrong, correct it{forget}.\n"
        "Never save secrets, credentials, tokens or personal data, whole files or logs, or anything that "
        "only matters to this turn or is cheap to re-read.\n"
        "The server runs memory calls itself and the user does not see them; say so when you save "
        "something that matters.\n"
    )


def build_fragment(store: MemoryStore, tools: tuple[str, ...]) -> str:
    """The fragment for ``store`` now, offering the named memory tools."""
    ranked = store.ranked()
    lines = bootstrap_lines(ranked)
    head = (
        "# Memory\n"
        f"You have a memory for this workspace ({store.scope.workspace}) that outlives the conversation. "
        "Its entries were written in earlier sessions and may be stale: verify a recalled fact against the "
        "files or the user before relying on it.\n"
    )
    note = f"Note: {store.note}\n" if store.note else ""
    if lines:
        shown = f"{len(lines)} of {len(ranked)}" if len(lines) < len(ranked) else f"all {len(ranked)}"
        listing = f"Saved entries ({shown}; key [importance, last updated]: first line):\n" + "\n".join(lines)
    else:
        listing = "Saved entries: none yet."
    return head + _usage(tools) + note + listing


class FragmentCache:
    """conversation id → its frozen fragment (the newest ``size`` conversations)."""

    def __init__(self, size: int = CACHE_CONVERSATIONS) -> None:
        self.size = size
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, conversation: str, build: Callable[[], str]) -> str:
        with self._lock:
            text = self._items.get(conversation)
            if text is not None:
                self._items.move_to_end(conversation)
                return text
        text = build()
        with self._lock:
            text = self._items.setdefault(conversation, text)
            self._items.move_to_end(conversation)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return text
