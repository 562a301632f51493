"""``tinytitan count-tokens`` equals the server's usage.prompt_tokens, on every protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.backends.stub import StubBackend
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import live_server

runner = CliRunner()
TOOLS_CHAT = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
REQUESTS: dict[str, tuple[str, dict[str, Any], Any]] = {
    "chat": (
        "/v1/chat/completions",
        {
            "model": STUB_MODEL,
            "tools": TOOLS_CHAT,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Count me, please."}],
        },
        lambda r: r["usage"]["prompt_tokens"],
    ),
    "responses": (
        "/v1/responses",
        {"model": STUB_MODEL, "instructions": "Be brief.", "input": "Count me, please."},
        lambda r: r["usage"]["input_tokens"],
    ),
    "messages": (
        "/v1/messages",
        {
            "model": STUB_MODEL,
            "max_tokens": 50,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": "Count me, please."}],
        },
        lambda r: r["usage"]["input_tokens"] + r["usage"]["cache_read_input_tokens"],
    ),
}


@pytest.mark.parametrize("api", list(REQUESTS))
def test_count_matches_server_usage(tmp_path: Path, api: str) -> None:
    path, body, prompt_tokens = REQUESTS[api]
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script()))
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body))
    with live_server(StubBackend(script())) as live:
        served = prompt_tokens(httpx.post(live.url + path, json=body).json())
    result = runner.invoke(app, ["count-tokens", str(request), "--stub", str(stub), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"prompt_tokens": served, "api": api, "model": STUB_MODEL}
    plain = runner.invoke(app, ["count-tokens", "--stub", str(stub)], input=json.dumps(body))
    assert plain.output.strip() == str(served)


def test_refusals_are_clean_errors(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script()))
    bad = runner.invoke(app, ["count-tokens", "--stub", str(stub)], input='{"messages": [{"role": "robot"}]}')
    assert bad.exit_code == 2 and "unknown role 'robot'" in bad.output
    broken = runner.invoke(app, ["count-tokens", "--stub", str(stub)], input="{nope")
    assert broken.exit_code == 2 and "is not JSON" in broken.output
    wrong_api = runner.invoke(app, ["count-tokens", "--stub", str(stub), "--api", "soap"], input="{}")
    assert wrong_api.exit_code == 2


def test_counts_with_a_gguf_file_as_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model FILE.gguf`` (here the embedded SmolLM2): the count the server reported for this request."""
    from tinytitan.engine.backends.mlx.embedded import embedded_gguf

    monkeypatch.setenv("TINYTITAN_OPENBLAS", "0")  # no re-exec inside the test process
    gguf = embedded_gguf()
    assert gguf is not None
    request = tmp_path / "r.json"
    question = "What is the capital of France? Answer in one sentence."
    request.write_text(json.dumps({"messages": [{"role": "user", "content": question}]}))
    result = runner.invoke(app, ["count-tokens", str(request), "--model", str(gguf), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    # ChatML with SmolLM2's default system line: 42 tokens, as `serve` reports usage.prompt_tokens
    assert out == {"prompt_tokens": 42, "api": "chat", "model": "SmolLM2-135M-Instruct.Q4_1"}
