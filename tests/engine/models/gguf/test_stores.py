"""GGUF files in Ollama's and LM Studio's stores are listed and servable by their listed id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.gguf.stores import gguf_store_models, lmstudio_models, ollama_models
from tinytitan.engine.models.mlx.resolve import resolve_model

GGUF_BYTES = b"GGUF\x03\x00\x00\x00" + b"\x00" * 16


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    return tmp_path


def _ollama(root: Path, registry: str, namespace: str, model: str, tag: str, digest: str) -> Path:
    manifest = root / "manifests" / registry / namespace / model / tag
    manifest.parent.mkdir(parents=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 24},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(exist_ok=True)
    blob.write_bytes(GGUF_BYTES)
    return blob


def test_ollama_manifests_name_their_gguf_blobs(home: Path) -> None:
    root = home / ".ollama" / "models"
    qwen = _ollama(root, "registry.ollama.ai", "library", "qwen3", "0.6b", "a" * 64)
    other = _ollama(root, "hf.co", "someone", "model-GGUF", "Q4_K_M", "b" * 64)
    rows = ollama_models()
    assert [(r["id"], r["path"]) for r in rows] == [
        ("ollama:hf.co/someone/model-GGUF:Q4_K_M", str(other)),
        ("ollama:qwen3:0.6b", str(qwen)),
    ]
    assert all(r["source"] == "ollama" and r["size_bytes"] == len(GGUF_BYTES) for r in rows)


def test_ollama_models_env_overrides_the_root(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = home / "elsewhere"
    _ollama(root, "registry.ollama.ai", "library", "gemma3", "1b", "c" * 64)
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    assert [r["id"] for r in ollama_models()] == ["ollama:gemma3:1b"]


def test_lmstudio_lists_gguf_files_but_not_projectors_or_other_files(home: Path) -> None:
    folder = home / ".lmstudio" / "models" / "lmstudio-community" / "Qwen3-0.6B-GGUF"
    folder.mkdir(parents=True)
    (folder / "Qwen3-0.6B-Q8_0.gguf").write_bytes(GGUF_BYTES)
    (folder / "mmproj-model-f16.gguf").write_bytes(GGUF_BYTES)
    (folder / "broken.gguf").write_bytes(b"not a gguf")
    (folder / "README.md").write_text("hi")
    assert [r["id"] for r in lmstudio_models()] == ["lmstudio:lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0"]


def test_nothing_installed_lists_nothing_but_the_embedded_model(home: Path) -> None:
    rows = gguf_store_models()
    assert [r["source"] for r in rows] == ["embedded"]
    assert rows[0]["id"] == "embedded:SmolLM2-135M-Instruct" and rows[0]["path"].endswith(".gguf")


def test_a_listed_id_that_is_gone_is_a_clear_error(home: Path) -> None:
    with pytest.raises(ModelUnavailable, match=r"model ollama:nope:1b is not in its store"):
        resolve_model("ollama:nope:1b")
