"""Real clients sending pictures (issue 41) to ``serve --stub`` with a vision script: Codex attaches one
with ``codex exec -i`` (an ``input_image``), Claude Code reads a .png with its Read tool and sends it
back as an ``image`` block inside the ``tool_result``. And Codex attaching one to the tiny random
vision model (``serve --model``): its answer is gibberish, so what is checked is that the picture
reached the model (the usage counts its image tokens) and that Codex finishes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tinytitan.testing import sse
from tinytitan.testing.images import data_url, picture

from .conftest import StubServer, _start, _stop
from .proxy import DONE_TEXT, Proxy

if TYPE_CHECKING:
    from .conftest import Claude, Codex, StartStub

PNG = picture("png", 8, 6)
DIGEST = hashlib.sha256(PNG).hexdigest()


def test_codex_attaches_a_picture(stub: StartStub, codex: Codex) -> None:
    server = stub(
        {
            "vision": True,
            "rules": [
                {"when": {"image_digest": DIGEST[:16]}, "reply": {"text": "a red rectangle"}},
                {"reply": {"text": "no picture came"}},
            ],
        }
    )
    (codex.ws.work / "picture.png").write_bytes(PNG)
    run = codex.run(server, "what is in this picture?", "-i", "picture.png", "--")  # -i takes several files
    assert run.returncode == 0, run.describe()
    assert run.stdout.strip() == "a red rectangle", run.describe()
    last = server.requests()[-1]["messages"][-1]
    assert last["role"] == "user" and [i["digest"] for i in last["images"]] == [DIGEST]


def test_claude_code_reads_a_screenshot_with_its_read_tool(stub: StartStub, claude: Claude) -> None:
    shot = claude.ws.work / "shot.png"
    shot.write_bytes(PNG)
    server = stub(
        {
            "vision": True,
            "rules": [
                {"when": {"last_role": "tool", "image_digest": DIGEST[:16]}, "reply": {"text": "a red rectangle"}},
                {"when": {"last_role": "tool"}, "reply": {"text": "the tool result held no picture"}},
                {
                    "when": {"user_contains": "shot.png"},
                    "reply": {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(shot)}}]},
                },
            ],
        }
    )
    run = claude.run(server, "what is in shot.png?", "--dangerously-skip-permissions")
    assert run.returncode == 0, run.describe()
    assert json.loads(run.stdout)["result"] == "a red rectangle", run.describe()
    answered = [r for r in server.requests() if r["messages"][-1]["role"] == "tool"][-1]
    assert [i["digest"] for i in answered["messages"][-1]["images"]] == [DIGEST]


@pytest.fixture
def tiny_vision(tiny_vision_dir: Path, tmp_path: Path) -> Iterator[StubServer]:
    """``tinytitan serve --model`` the tiny random vision model."""
    proc, server = _start(["--model", str(tiny_vision_dir), "--model-id", "tiny-vision"], tmp_path, "tiny-vision")
    yield server
    _stop(proc)


def _capped(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """A random model answers on and on, and its text may spell a tool call: ``{"done": …}``, no tools."""
    if not path.endswith("/responses"):
        return None
    return {**body, "tool_choice": "none", "text": {**(body.get("text") or {}), "format": DONE_TEXT}}


def _input_tokens(server: StubServer, body: dict[str, Any]) -> int:
    fields = ("model", "input", "instructions", "tools", "tool_choice", "reasoning", "text")
    counted = httpx.post(
        server.v1 + "/responses/input_tokens", json={k: body[k] for k in fields if k in body}, timeout=60
    )
    assert counted.status_code == 200, counted.text
    tokens: int = counted.json()["input_tokens"]
    return tokens


def _without_images(body: dict[str, Any]) -> dict[str, Any]:
    def parts(item: dict[str, Any]) -> dict[str, Any]:
        content = item.get("content")
        if not isinstance(content, list):
            return item
        return {**item, "content": [p for p in content if p.get("type") != "input_image"]}

    return {**body, "input": [parts(item) for item in body["input"]]}


def test_codex_attaches_a_picture_for_the_tiny_vision_model(tiny_vision: StubServer, codex: Codex) -> None:
    codex.ws.timeout = 300
    (codex.ws.work / "picture.png").write_bytes(PNG)
    catalog = codex.ws.root / "catalog.json"  # the server's own listing: its Codex entry takes images
    catalog.write_text(httpx.get(tiny_vision.v1 + "/models", timeout=10).text)
    proxy = Proxy(tiny_vision.url, _capped)
    try:
        run = codex.run(
            proxy.before(tiny_vision),
            "what is in this picture?",
            "-c",
            f"model_catalog_json={json.dumps(str(catalog))}",
            "-i",
            "picture.png",
            "--",
        )
    finally:
        proxy.close()
    assert run.returncode == 0, f"{run.describe()}\n{tiny_vision.access_log()[-3000:]}"
    assert "metadata for `tiny-vision` not found" not in run.stderr, run.describe()  # the catalog was read
    assert json.loads(run.stdout.strip().splitlines()[-1]) in ({"done": True}, {"done": False}), run.describe()
    (body,) = proxy.bodies
    images = [p for i in body["input"] if isinstance(i.get("content"), list) for p in i["content"]]
    assert data_url(PNG) in [p.get("image_url") for p in images if p.get("type") == "input_image"]
    (completed,) = [e for _, e in sse.events(proxy.answers[0]) if e.get("type") == "response.completed"]
    usage = completed["response"]["usage"]
    assert usage["input_tokens"] == _input_tokens(tiny_vision, body)  # the prompt the model saw...
    assert usage["input_tokens"] - _input_tokens(tiny_vision, _without_images(body)) >= 4  # ...held the picture
