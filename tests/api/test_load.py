"""Load: many concurrent streaming clients against a bounded queue (reference §1, §2, §13).

One client holds the only slot; then N streaming clients arrive at once. Exactly ``--queue-limit``
of them are admitted to wait, every other one is refused at once (429 on OpenAI paths, 529 on
Anthropic ones, both with ``Retry-After``); when the slot frees, every admitted stream runs to its
end. Nothing hangs: every client is bounded by a timeout, and the queue ends empty.
Memory over many rounds is measured by ``benchmarks/load.py`` (figures, not assertions).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer
from tinytitan.testing.waiting import wait_until_async

QUEUE_LIMIT = 20
SCRIPT = script(
    {"when": {"user_contains": "hold"}, "reply": {"text": " ".join(["held"] * 400), "chunk_delay_ms": 50}},
    {"reply": {"text": "one two three four five", "chunk_delay_ms": 5}},
)

PROTOCOLS: dict[str, dict[str, Any]] = {
    "chat": {
        "path": "/chat/completions",
        "refused": 429,
        "end": "data: [DONE]",
        "headers": {},
        "body": lambda text: {"model": STUB_MODEL, "stream": True, "messages": [{"role": "user", "content": text}]},
    },
    "messages": {
        "path": "/messages",
        "refused": 529,
        "end": "event: message_stop",
        "headers": {"anthropic-version": "2023-06-01"},
        "body": lambda text: {
            "model": STUB_MODEL,
            "stream": True,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": text}],
        },
    },
}


async def _run(live: LiveServer, protocol: dict[str, Any], clients: int) -> list[tuple[int, str, str | None]]:
    url = live.v1 + protocol["path"]
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=0)
    results: list[tuple[int, str, str | None]] = []
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=protocol["headers"]) as http:
        async with http.stream("POST", url, json=protocol["body"]("hold the slot")) as holder:
            lines = holder.aiter_lines()  # keep a reference: a dropped iterator closes the connection
            assert holder.status_code == 200
            await anext(lines)
            await wait_until_async(lambda: live.engine.queue.running == 1)

            async def client() -> None:
                async with http.stream("POST", url, json=protocol["body"]("hi")) as r:
                    text = (await r.aread()).decode()
                    results.append((r.status_code, text, r.headers.get("retry-after")))

            tasks = [asyncio.ensure_future(asyncio.wait_for(client(), 60)) for _ in range(clients)]
            refused = clients - QUEUE_LIMIT
            await wait_until_async(lambda: len(results) == refused and live.engine.queue.waiting == QUEUE_LIMIT)
            # nobody admitted has an answer yet: the slot is still held
            assert all(status == protocol["refused"] for status, _, _ in results)
        # the holder is gone: its slot frees and the waiting streams run, one after another
        await asyncio.gather(*tasks)
    return results


@pytest.mark.parametrize(("name", "clients"), [("chat", 100), ("messages", 40)])
def test_concurrent_streams_complete_or_are_refused(serve: Any, name: str, clients: int) -> None:
    protocol = PROTOCOLS[name]
    with serve(SCRIPT, queue_limit=QUEUE_LIMIT) as live:
        results = asyncio.run(_run(live, protocol, clients))
        assert len(results) == clients
        done = [text for status, text, _ in results if status == 200]
        refused = [(text, retry) for status, text, retry in results if status == protocol["refused"]]
        assert len(done) == QUEUE_LIMIT and len(refused) == clients - QUEUE_LIMIT
        assert all(protocol["end"] in text for text in done)
        assert all(retry is not None and int(retry) >= 1 for _, retry in refused)
        assert live.engine.queue.running == 0 and live.engine.queue.waiting == 0
