"""The real Codex CLI applying a patch through a freeform ``apply_patch`` call written by tiny random
models of three families with different call syntaxes (issue 38): Qwen3's JSON call (the input a JSON
string), Qwen3-Coder's XML-ish call (raw text ended by plain text) and GLM-4.7's key/value call (raw
text between special tokens).

A random model never chooses to call a tool, so a small proxy between Codex and ``tinytitan serve``
stands in for that choice, with nothing but API fields: on Codex's first request it forces the call
(``tool_choice: {"type": "custom", "name": "apply_patch"}``) and narrows the tool's grammar to one file
in the workspace (a sublanguage of Codex's own grammar — a random model must not pick the path);
on the next it asks for a JSON answer, so the model ends its turn. The patch itself is the model's,
held to the grammar by the engine; Codex parses it with its own parser and applies it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tinytitan.engine.grammar.freeform import accepts, compile_input
from tinytitan.testing import sse
from tinytitan.testing.freeform import grammar

from .conftest import Codex, StubServer, _start, _stop

NARROW = (
    'start: "*** Begin Patch\\n*** Add File: tiny.txt\\n" line~1..3 "*** End Patch\\n"\nline: "+" /[a-z]{1,8}/ "\\n"\n'
)
DONE = {
    "type": "json_schema",
    "name": "done",
    "schema": {
        "type": "object",
        "properties": {"done": {"type": "boolean"}},
        "required": ["done"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Proxy:
    """Forwards Codex's requests to ``upstream``, adjusting the Responses bodies as the module says."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.bodies: list[dict[str, Any]] = []  # what the server was sent
        self.answers: list[bytes] = []  # what it answered
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                self._forward(raw)

            def _forward(self, raw: bytes | None) -> None:
                if raw is not None and self.path.endswith("/responses"):
                    raw = proxy.adjust(json.loads(raw))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                with httpx.Client(timeout=600) as client:
                    answer = client.request(self.command, proxy.upstream + self.path, content=raw, headers=headers)
                if raw is not None and self.path.endswith("/responses"):
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

    def adjust(self, body: dict[str, Any]) -> bytes:
        answered = any(isinstance(i, dict) and i.get("type") == "custom_tool_call_output" for i in body["input"])
        if answered:
            body["text"] = {**(body.get("text") or {}), "format": DONE}
        else:
            body["tool_choice"] = {"type": "custom", "name": "apply_patch"}
            for tool in body["tools"]:
                if tool.get("name") == "apply_patch":
                    tool["format"] = {"type": "grammar", "syntax": "lark", "definition": NARROW}
        self.bodies.append(body)
        return json.dumps(body).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=["qwen3", "qwen3-coder", "glm-4.7"])
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StubServer]:
    """``tinytitan serve --model`` the family's tiny random model, behind the proxy."""
    from tinytitan.testing.device import on_device
    from tinytitan.testing.families import family_dir

    name = str(request.param)
    path: Path = on_device(lambda: family_dir(name))  # built (or found) once per machine
    proc, server = _start(["--model", str(path), "--model-id", name], tmp_path_factory.mktemp(name), name)
    yield server
    _stop(proc)


@pytest.mark.timeout(600)
def test_codex_applies_a_patch_a_tiny_model_wrote(family: StubServer, codex: Codex) -> None:
    codex.ws.timeout = 500
    catalog = _catalog(codex.ws.config, family.model)
    proxy = Proxy(family.url)
    try:
        run = codex.run(
            StubServer(proxy.url, family.port, family.log, family.model),
            "add tiny.txt",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c",
            f"model_catalog_json={json.dumps(str(catalog))}",
            provider_keys={"stream_idle_timeout_ms": 480000},
        )
    finally:
        proxy.close()
    assert run.returncode == 0, run.describe()
    first = [data for _, data in sse.events(proxy.answers[0])]
    (call,) = [e["item"] for e in first if e["type"] == "response.output_item.done"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    patch = call["input"]
    assert accepts(compile_input("lark", grammar("codex_apply_patch")).grammar, patch)  # Codex's own grammar
    lines = [line[1:] for line in patch.splitlines() if line.startswith("+")]
    assert (codex.ws.work / "tiny.txt").read_text(encoding="utf-8") == "".join(f"{line}\n" for line in lines)
    assert json.loads(run.stdout.strip().splitlines()[-1]) in ({"done": True}, {"done": False}), run.describe()
    assert len(proxy.bodies) == 2 and proxy.bodies[1]["input"][-1]["type"] == "custom_tool_call_output"


def _catalog(directory: Path, model: str) -> Path:
    """The catalog entry ``tinytitan launch codex`` would write for a model that takes freeform tools."""
    from tinytitan.launch.configs import codex_entry
    from tinytitan.launch.server import Served

    served = Served("http://unused", model, 131072, 8192, freeform_tools=True)
    path = directory / "tinytitan-models.json"
    path.write_text(json.dumps({"models": [codex_entry(served, 100000, "You are Codex, a coding agent.")]}))
    return path
