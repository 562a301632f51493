"""Codex and the catalog the server serves (issue 39 items 3-4).

``GET /v1/models`` answers in the shape Codex's model discovery decodes (a ``models`` list of its
``ModelInfo``) beside OpenAI's ``data``: the real Codex reads the whole answer as its catalog without
error. ``tinytitan launch codex`` points Codex at that catalog entry, and its provider has Codex talk
over the Responses WebSocket and compact in band (the server's log shows both).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx

from tinytitan.api.codex_models import BASE_INSTRUCTIONS
from tinytitan.engine.passes.compaction import HANDOVER_ASK, HANDOVER_INSTRUCTION

from .conftest import client_binary, run_client

if TYPE_CHECKING:
    from .conftest import StartStub, Workspace

NOTE = "Requirements:\n- remember the word PLOVER\nNext step:\n- answer the next question"
SCRIPT = {
    "context_window": 32768,
    "rules": [
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}},
        {"reply": {"text": "noted"}},
    ],
}


def test_codex_decodes_the_served_model_list(stub: StartStub, workspace: Workspace) -> None:
    codex = client_binary("codex")
    server = stub(SCRIPT)
    listing = httpx.get(server.v1 + "/models", timeout=10).json()
    assert [m["id"] for m in listing["data"]] == [m["slug"] for m in listing["models"]] == [server.model]
    catalog = workspace.root / "served-models.json"
    catalog.write_text(json.dumps(listing), encoding="utf-8")  # the whole answer, data and all
    env = {**workspace.base_env(), "CODEX_HOME": str(workspace.config)}
    run = run_client(
        [str(codex), "-c", f"model_catalog_json={json.dumps(str(catalog))}", "debug", "models"],
        env=env,
        cwd=workspace.work,
        timeout=workspace.timeout,
    )
    assert run.returncode == 0, run.describe()
    (model,) = [m for m in json.loads(run.stdout)["models"] if m["slug"] == server.model]
    assert (model["context_window"], model["auto_compact_token_limit"]) == (32768, 32768 - 8192)
    assert model["input_modalities"] == ["text"]


def test_launch_codex_talks_over_the_websocket_and_compacts_in_band(stub: StartStub, workspace: Workspace) -> None:
    client_binary("codex")
    server = stub(SCRIPT)
    # a low compaction limit after the launch's own: the second turn compacts first
    codex_args = ("-c", "model_auto_compact_token_limit=1000", "exec", "--skip-git-repo-check")
    first = workspace.launch("codex", "--url", server.url, "--", *codex_args, "remember PLOVER")
    assert first.returncode == 0 and first.stdout.strip() == "noted", first.describe()
    resume = ("-c", "model_auto_compact_token_limit=1000", "exec", "resume", "--last", "--skip-git-repo-check")
    second = workspace.launch("codex", "--url", server.url, "--", *resume, "what was the word?")
    assert second.returncode == 0 and second.stdout.strip() == "noted", second.describe()

    turn, compaction, after = server.requests()
    assert compaction["messages"][-1]["content"] == f"{HANDOVER_INSTRUCTION}\n\n{HANDOVER_ASK}"
    assert after["system"].endswith(NOTE) and after["messages"][-1]["content"] == "what was the word?"
    assert '"WebSocket /v1/responses" [accepted]' in server.access_log()
    # the served catalog entry; Codex's own instructions (over 4,096 tokens) do not fit an eighth of 32k
    catalog = json.loads((workspace.home / ".codex" / "tinytitan-models.json").read_text(encoding="utf-8"))
    assert catalog["models"][0]["slug"] == server.model
    assert catalog["models"][0]["base_instructions"] == BASE_INSTRUCTIONS
    assert turn["system"].startswith(BASE_INSTRUCTIONS)
