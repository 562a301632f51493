"""``tinytitan count-tokens`` equals the server's usage.prompt_tokens, on every protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.models.stub import StubBackend
from tinytitan.testing.scripts import STUB_MODEL, script
from tinytitan.testing.server import live_server

ROOT = Path(__file__).resolve().parents[2]
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


def test_empty_stdin_says_what_to_give(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script()))
    done = subprocess.run(
        [sys.executable, "-m", "tinytitan", "count-tokens", "--stub", str(stub)],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "tinytitan count-tokens: standard input is empty; pipe a request body in, or give REQUEST.json"
    )


CLAUDE_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 32000,
    "system": [{"type": "text", "text": "You are Claude Code."}],
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Count me, please."}]}],
    "thinking": {"type": "adaptive"},
}


def test_a_claude_named_request_counts_as_a_server_with_the_same_flags(tmp_path: Path, tiny_dir: Path) -> None:
    """A saved Claude Code request names ``claude-*``: the count is for the model given, with the knobs
    that change it (``--model-id``, ``--thinking off``), and equals the server's count_tokens."""
    from tinytitan.engine.models.mlx import MlxBackend

    request = tmp_path / "claude.json"
    request.write_text(json.dumps(CLAUDE_REQUEST))
    body = {**CLAUDE_REQUEST, "model": "tiny-x"}
    del body["max_tokens"]
    with live_server(MlxBackend(str(tiny_dir), model_id="tiny-x"), default_reasoning="off") as live:
        served = httpx.post(live.url + "/v1/messages/count_tokens", json=body, timeout=60).json()["input_tokens"]
    flags = ["--model", str(tiny_dir), "--model-id", "tiny-x", "--json"]
    off = runner.invoke(app, ["count-tokens", str(request), *flags, "--thinking", "off"])
    assert off.exit_code == 0, off.output
    assert json.loads(off.output) == {"prompt_tokens": served, "api": "messages", "model": "tiny-x"}
    on = runner.invoke(app, ["count-tokens", str(request), *flags])
    assert on.exit_code == 0 and json.loads(on.output)["prompt_tokens"] != served  # the knob changes the count


def test_stdin_survives_the_openblas_reexec(tiny_dir: Path) -> None:
    """``count-tokens -`` with a real model: the CLI re-executes itself with OpenBLAS preloaded
    before reading stdin (reading it first left the re-executed process an empty stdin)."""
    from tinytitan.cpu_blas import OPT_OUT_ENV, REEXEC_ENV, find_openblas
    from tinytitan.testing.missing import missing

    if find_openblas() is None:
        missing("libopenblas0-pthread is not installed here: no re-exec to test (CI installs it)")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", REEXEC_ENV, OPT_OUT_ENV)}
    env["PYTHONPATH"] = str(ROOT)
    body = json.dumps({"messages": [{"role": "user", "content": "Count me, please."}]})
    args = [sys.executable, "-m", "tinytitan", "count-tokens", "-", "--model", str(tiny_dir), "--json"]
    done = subprocess.run(args, input=body, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prompt_tokens"] > 5


def test_counts_with_a_gguf_file_as_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--model FILE.gguf`` (here the embedded SmolLM2): the count the server reported for this request."""
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

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


def test_a_picture_counts_its_image_tokens_as_the_server_does(
    tmp_path: Path, tiny_vision_dir: Path, tiny_dir: Path
) -> None:
    """With the tiny vision model the count holds the picture's image tokens and equals the server's
    usage; a text-only model refuses the picture by name, in one line."""
    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.testing.images import data_url, picture

    image = {"type": "image_url", "image_url": {"url": data_url(picture("png", 100, 50))}}
    body = {"model": "tiny-v", "messages": [{"role": "user", "content": [{"type": "text", "text": "What?"}, image]}]}
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body))
    with live_server(MlxBackend(str(tiny_vision_dir), model_id="tiny-v")) as live:
        served = httpx.post(live.v1 + "/chat/completions", json={**body, "max_tokens": 1}, timeout=300).json()
    result = runner.invoke(app, ["count-tokens", str(request), "--model", str(tiny_vision_dir), "--model-id", "tiny-v"])
    assert result.exit_code == 0, result.output
    assert int(result.output) == served["usage"]["prompt_tokens"]
    words = json.dumps({**body, "messages": [{"role": "user", "content": "What?"}]})
    without = runner.invoke(app, ["count-tokens", "--model", str(tiny_vision_dir)], input=words)
    assert int(result.output) - int(without.output) >= 12  # the picture's 12 image tokens and their markers
    text_only = runner.invoke(app, ["count-tokens", str(request), "--model", str(tiny_dir)])
    assert text_only.exit_code == 2
    assert "has no vision input" in text_only.output and "(messages[0].content[1])" in text_only.output
