"""``GET /v1/models`` in the shape Codex's model discovery decodes (issue 39.3): a ``models`` list of
its ``ModelInfo`` beside OpenAI's ``data``; the output cap a client plans with, not the window.
(The real Codex reads the whole answer in ``tests/clients/test_codex_catalog.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tinytitan.api.codex_models import BASE_INSTRUCTIONS, codex_model
from tinytitan.engine.models.stub import StubBackend
from tinytitan.engine.request import ModelInfo
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import LiveServer, live_server

# codex-rs protocol/src/openai_models.rs ModelInfo: the fields without a serde default, and their types
REQUIRED = {
    "slug": str,
    "display_name": str,
    "supported_reasoning_levels": list,
    "shell_type": str,
    "visibility": str,
    "supported_in_api": bool,
    "priority": int,
    "base_instructions": str,
    "supports_reasoning_summaries": bool,
    "support_verbosity": bool,
    "truncation_policy": dict,
    "supports_parallel_tool_calls": bool,
    "experimental_supported_tools": list,
}
EFFORTS = {"none", "minimal", "low", "medium", "high", "xhigh"}  # its ReasoningEffort enum


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with live_server(StubBackend(script(context_window=40960))) as server:
        yield server


def test_the_listing_has_openais_data_and_codexs_models(live: LiveServer) -> None:
    listing = httpx.get(live.v1 + "/models").json()
    (entry,) = listing["data"]
    assert listing["object"] == "list" and entry["id"] == STUB_MODEL and entry["object"] == "model"
    assert (entry["context_window"], entry["max_output_tokens"]) == (40960, 10240)  # a quarter: a cap to plan with
    (model,) = listing["models"]
    for field, kind in REQUIRED.items():
        assert isinstance(model[field], kind), field
    assert model["slug"] == STUB_MODEL and model["visibility"] in ("list", "hide", "none")
    assert model["shell_type"] in ("default", "local", "unified_exec", "disabled", "shell_command")
    assert model["truncation_policy"]["mode"] in ("bytes", "tokens") and isinstance(
        model["truncation_policy"]["limit"], int
    )
    assert (model["context_window"], model["auto_compact_token_limit"]) == (40960, 40960 - 10240)
    assert model["input_modalities"] == ["text"] and model["apply_patch_tool_type"] in ("freeform", "function")
    assert all(
        level["effort"] in EFFORTS and isinstance(level["description"], str)
        for level in model["supported_reasoning_levels"]
    )
    assert model["base_instructions"] == BASE_INSTRUCTIONS


def test_an_anthropic_listing_has_no_codex_list(live: LiveServer) -> None:
    listing = httpx.get(live.v1 + "/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert "models" not in listing
    (entry,) = listing["data"]
    assert (entry["max_input_tokens"], entry["max_tokens"]) == (40960, 10240)
    assert entry["capabilities"]["structured_outputs"] == {"supported": True}


def test_reasoning_levels_in_codexs_words() -> None:
    info = ModelInfo("m", 131072, reasoning_levels=("off", "on"), default_reasoning="on", freeform_grammars=True)
    model = codex_model("m", info)
    assert [level["effort"] for level in model["supported_reasoning_levels"]] == ["none", "medium"]
    assert model["default_reasoning_level"] == "medium" and model["apply_patch_tool_type"] == "freeform"
    assert model["max_output_tokens"] == 32000  # at most 32,000 however large the window
    plain = codex_model("m", ModelInfo("m", 8192, reasoning_levels=(), default_reasoning=None, tool_calls=False))
    assert plain["supported_reasoning_levels"] == [] and "default_reasoning_level" not in plain
    assert plain["apply_patch_tool_type"] == "function" and plain["supports_parallel_tool_calls"] is False
    assert model["supports_search_tool"] is True and plain["supports_search_tool"] is False  # Codex's tool_search
