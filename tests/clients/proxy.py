"""A small HTTP proxy between a real client and ``tinytitan serve`` that stands in for a random model's
choices with nothing but API fields (a forced ``tool_choice``, a narrowed schema or grammar, a cap).

``adjust(path, body)`` sees each JSON POST body on the way in and returns it changed (or as it was);
the proxy keeps what it sent (``bodies``) and what came back (``answers``) for the paths it adjusted.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from .conftest import StubServer

# What a capped turn asks for instead of free text: ``{"done": true|false}``, a few tokens that end
# with the grammar (a random model's text never ends, and may spell a tool call). DONE is Messages'
# ``output_config.format``; DONE_TEXT is Responses' ``text.format``.
DONE: dict[str, Any] = {
    "type": "json_schema",
    "schema": {
        "type": "object",
        "properties": {"done": {"type": "boolean"}},
        "required": ["done"],
        "additionalProperties": False,
    },
}
DONE_TEXT: dict[str, Any] = {"name": "done", "strict": True, **DONE}

Adjust = Callable[[str, dict[str, Any]], dict[str, Any] | None]  # None: forward untouched, unrecorded


class Proxy:
    def __init__(self, upstream: str, adjust: Adjust) -> None:
        self.upstream = upstream
        self.bodies: list[dict[str, Any]] = []  # what the server was sent, where ``adjust`` took part
        self.answers: list[bytes] = []  # what it answered to those
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("content-length") or 0)))

            def _forward(self, raw: bytes | None) -> None:
                path = self.path.split("?")[0]
                body = adjust(path, json.loads(raw)) if raw else None
                if body is not None:
                    proxy.bodies.append(body)
                    raw = json.dumps(body).encode()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                with httpx.Client(timeout=600) as client:
                    answer = client.request(self.command, proxy.upstream + self.path, content=raw, headers=headers)
                if body is not None:
                    proxy.answers.append(answer.content)
                self.send_response(answer.status_code)
                for key in ("content-type", "cache-control"):
                    if key in answer.headers:
                        self.send_header(key, answer.headers[key])
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def before(self, server: StubServer) -> StubServer:
        """``server`` as a client reaches it through this proxy."""
        return dataclasses.replace(server, url=self.url)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
