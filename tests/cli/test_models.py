"""``tinytitan models``: cached hub models, and a running server's list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.testing.server import LiveServer

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_local_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ollama / LM Studio folders of the machine running the tests stay out of the listing."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)


def _fake_cache(root: Path) -> None:
    """A hub cache laid out as huggingface-hub writes it: one model with a config, one dataset."""
    snap = root / "models--acme--tiny-chat" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (snap / "model.safetensors").write_bytes(b"0" * 1024)
    (root / "models--acme--tiny-chat" / "refs").mkdir()
    (root / "models--acme--tiny-chat" / "refs" / "main").write_text("abc123")
    data = root / "datasets--acme--words" / "snapshots" / "def456"
    data.mkdir(parents=True)
    (data / "config.json").write_text("{}")


def test_lists_cached_models(tmp_path: Path) -> None:
    _fake_cache(tmp_path)
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == ["acme/tiny-chat", "embedded:SmolLM2-135M-Instruct"]
    assert rows[0]["path"].endswith("abc123") and rows[0]["source"] == "hub"
    table = runner.invoke(app, ["models", "--cache-dir", str(tmp_path)])
    assert "acme/tiny-chat" in table.output


def test_empty_cache_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tinytitan.engine.backends.mlx.embedded.embedded_gguf", lambda: None)
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none")])
    assert result.exit_code == 0 and "no models found" in result.output


def test_lists_gguf_files_of_other_tools(tmp_path: Path) -> None:
    folder = tmp_path / "home" / ".lmstudio" / "models" / "acme" / "Tiny-GGUF"
    folder.mkdir(parents=True)
    (folder / "tiny.Q8_0.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16)
    result = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none"), "--json"])
    rows = {r["id"]: r for r in json.loads(result.output)}
    assert rows["lmstudio:acme/Tiny-GGUF/tiny.Q8_0"]["path"] == str(folder / "tiny.Q8_0.gguf")
    table = runner.invoke(app, ["models", "--cache-dir", str(tmp_path / "none")])
    assert "lmstudio:acme/Tiny-GGUF/tiny.Q8_0" in table.output


def test_lists_a_running_servers_models(server: LiveServer) -> None:
    result = runner.invoke(app, ["models", "--url", server.url, "--json"])
    assert json.loads(result.output) == [{"id": "stub-model"}]
