"""``MlxBackend(draft_model=...)`` (``serve --draft-model``): a smaller model of the same tokenizer
drafts through the Engine without changing a token; one of another tokenizer, or none at the path,
is refused before anything loads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ChatRequest, Message, ReasoningControls, Sampling
from tinytitan.engine.service import Engine
from tinytitan.testing.families import family_dir
from tinytitan.testing.loop import run


def answer(engine: Engine, seed: int) -> tuple[str, object]:
    request = ChatRequest(
        model=engine.info.id,
        messages=(Message("user", "Say something about drafts."),),
        reasoning=ReasoningControls(enable_thinking=False),
        sampling=Sampling(temperature=0.8, seed=seed),
        max_tokens=24,
    )
    done = run(engine.complete(request))
    return done.text, done.finished.usage


@pytest.fixture
def mlx_attention(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """mlx's own attention for every pass (see ``tests/engine/device/test_draft_model.py``: the NumPy
    one takes only multi-token passes, and its ~1e-6 differences can flip a seeded draw here)."""
    from tinytitan.engine.models.mlx import cpu_attention

    was = cpu_attention.installed()
    cpu_attention.uninstall()
    monkeypatch.setattr(cpu_attention, "install", lambda: None)  # the backends' load would install it
    yield
    monkeypatch.undo()
    if was:
        cpu_attention.install()


@pytest.mark.usefixtures("mlx_attention")
def test_a_smaller_draft_model_changes_no_token(tiny_dir: Path) -> None:
    small = family_dir("qwen3")  # 2 layers of width 32 (the tiny model: 4 of 64), the same tokenizer
    plain = Engine(MlxBackend(str(tiny_dir), prompt_cache_entries=0, drafts=False))
    drafted = Engine(MlxBackend(str(tiny_dir), prompt_cache_entries=0, draft_model=str(small)))
    try:
        for seed in (1, 2):
            assert answer(drafted, seed) == answer(plain, seed)
        backend = drafted.backend
        assert isinstance(backend, MlxBackend) and backend.batch is not None
        speculator = backend.batch.speculator
        assert speculator is not None and speculator.model is not None and speculator.from_model > 0
    finally:
        plain.shutdown()
        drafted.shutdown()


def test_a_draft_model_of_another_tokenizer_is_refused(tiny_dir: Path) -> None:
    other = family_dir("llama-3")
    with pytest.raises(ModelUnavailable, match=r"--draft-model .*: its tokenizer is not tiny.*'s") as refused:
        MlxBackend(str(tiny_dir), draft_model=str(other))
    assert "same family" in refused.value.message


def test_a_missing_draft_model_is_refused_naming_the_flag(tiny_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelUnavailable, match=r"^--draft-model .*nowhere: model not found"):
        MlxBackend(str(tiny_dir), draft_model=str(missing))


def test_no_drafts_no_draft_model(tiny_dir: Path) -> None:
    assert MlxBackend(str(tiny_dir), drafts=False).draft_source is None
