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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.grammar.freeform import accepts, compile_input
from tinytitan.testing import sse
from tinytitan.testing.freeform import grammar

from .conftest import Codex, StubServer, _start, _stop
from .proxy import DONE_TEXT, Proxy

NARROW = (
    'start: "*** Begin Patch\\n*** Add File: tiny.txt\\n" line~1..3 "*** End Patch\\n"\nline: "+" /[a-z]{1,8}/ "\\n"\n'
)


def adjust(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """Codex's first request forces the narrowed ``apply_patch`` call; the one after asks for ``DONE``."""
    if not path.endswith("/responses"):
        return None
    answered = any(isinstance(i, dict) and i.get("type") == "custom_tool_call_output" for i in body["input"])
    if answered:
        body["text"] = {**(body.get("text") or {}), "format": DONE_TEXT}
    else:
        body["tool_choice"] = {"type": "custom", "name": "apply_patch"}
        for tool in body["tools"]:
            if tool.get("name") == "apply_patch":
                tool["format"] = {"type": "grammar", "syntax": "lark", "definition": NARROW}
    return body


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
    proxy = Proxy(family.url, adjust)
    try:
        run = codex.run(
            proxy.before(family),
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
