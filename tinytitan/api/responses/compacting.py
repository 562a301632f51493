"""Server-side compaction on ``POST /v1/responses`` (HTTP and WebSocket): ``context_management``.

OpenAI's form: ``"context_management": [{"type": "compaction", "compact_threshold": N}]``. When the
rendered prompt reaches ``N`` tokens (or no longer fits the window), the server compacts the
conversation first — as a continuation of it, so the prompt cache serves it — and the response
carries the ``compaction`` item (``output[0]``, whole: ``output_item.added`` then ``.done``), then the
answer generated from the compacted window (the client's guidance and the note). The item is marked
as standing for everything before it (``prunes``), so the next turn continues from it whether the
client sends the earlier items again (stateless chaining), drops them, or continues with
``previous_response_id``. Without ``compact_threshold`` the threshold is 80 % of the context window.
``usage`` is the whole cost: the compaction's passes and the answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from litestar import Request, Response
from litestar.response import ServerSentEvent

from tinytitan.api.request_io import until_disconnect
from tinytitan.api.sse import SSE, sse_response
from tinytitan.api.streaming import Continued, encode_stream
from tinytitan.api.wire import Tagged
from tinytitan.engine.errors import GenerationFailed, InvalidRequest, TinyTitanError
from tinytitan.engine.job import Job
from tinytitan.engine.passes.compaction import compact
from tinytitan.engine.passes.server_side import continue_after
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.service import Engine

from .encode import ResponsesStream, compaction_item
from .wire import Response as ResponseObject

__all__ = ["DEFAULT_SHARE", "CompactingTurn", "compaction_threshold"]

log = logging.getLogger("tinytitan.api")

DEFAULT_SHARE = 0.8  # of the context window, when compact_threshold is absent or null


def compaction_threshold(value: Any, window: int) -> int | None:
    """The threshold ``context_management`` asks for (None: no server-side compaction); anything the
    API does not define is refused by name."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequest("context_management must be a list of entries", param="context_management")
    threshold: int | None = None
    for i, entry in enumerate(value):
        where = f"context_management[{i}]"
        if not isinstance(entry, dict):
            raise InvalidRequest("a context_management entry must be an object", param=where)
        if entry.get("type") != "compaction":
            raise InvalidRequest(
                f"context_management type {entry.get('type')!r} is not supported; the only type is 'compaction'",
                param=f"{where}.type",
                code="unsupported_value",
            )
        given = entry.get("compact_threshold")
        if given is not None and (not isinstance(given, int) or isinstance(given, bool) or given < 1):
            raise InvalidRequest(
                "compact_threshold must be a positive integer (tokens) or null",
                param=f"{where}.compact_threshold",
                code="invalid_value",
            )
        mine = given if given is not None else int(window * DEFAULT_SHARE)
        threshold = mine if threshold is None else min(threshold, mine)
    return threshold


@dataclass
class CompactingTurn:
    """A turn that compacts ``chat`` first, then answers from the compacted window."""

    engine: Engine
    chat: ChatRequest
    encoder: ResponsesStream
    streaming: bool
    job: Job | None = field(default=None, init=False)

    async def _compact(self) -> list[Tagged]:
        """Compact, and prepare the answer's job; the compaction item's events."""
        result = await compact(self.engine, self.chat)
        builder = self.encoder.builder
        builder.spent = result.usage
        events = builder.whole(compaction_item(result, prunes=True))
        self.job = await self.engine.prepare(continue_after(self.chat, result.note))
        return events

    async def stream(self) -> AsyncGenerator[SSE, None]:
        encoder = self.encoder
        for frame in encoder.frames(encoder.builder.start()):
            yield frame
        try:
            events = await self._compact()
        except TinyTitanError as exc:
            events = encoder.builder.fail(exc)
        except Exception:
            log.exception("a compaction failed")
            events = encoder.builder.fail(GenerationFailed())
        for frame in encoder.frames(events):
            yield frame
        if self.job is not None:
            async for frame in encode_stream(self.job.events(), Continued(encoder)):
                yield frame

    def keepalive(self) -> SSE:
        return self.encoder.keepalive()

    async def respond(self, request: Request[Any, Any, Any]) -> Response[ResponseObject] | ServerSentEvent:
        if self.streaming:
            return sse_response(self.stream(), request, keepalive=self.keepalive, on_close=self.close)
        try:
            await until_disconnect(request, self._compact())
            assert self.job is not None
            result = await until_disconnect(request, self.job.collect())
        finally:
            self.close()
        return Response(self.encoder.object(result))

    def close(self) -> None:
        if self.job is not None:
            self.job.close()
