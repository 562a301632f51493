"""``build.kv_budget``: the KV memory budget ``serve`` runs with (issue 42)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinytitan.engine.build import kv_budget
from tinytitan.engine.kv import budget as budget_module
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.models.stub import StubBackend
from tinytitan.settings import Settings
from tinytitan.testing.scripts import script


def test_the_flag_sets_it_and_off_turns_it_off() -> None:
    stub = StubBackend(script())
    chosen = kv_budget(Settings(max_kv_memory=123 * 2**20), stub)
    assert chosen is not None and (chosen.limit, chosen.source) == (123 * 2**20, "--max-kv-memory")
    assert kv_budget(Settings(max_kv_memory=0), stub) is None
    assert kv_budget(Settings(stub="s.json"), stub) is None  # a scripted backend has none unless asked


def test_by_default_half_of_what_the_weights_leave_free(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget_module, "available_memory", lambda: 10 * 2**30)
    backend = MlxBackend(str(tiny_dir))
    weights = sum(p.stat().st_size for p in tiny_dir.iterdir())
    chosen = kv_budget(Settings(), backend)
    assert chosen is not None and chosen.limit == (10 * 2**30 - weights) // 2
    assert chosen.source.startswith("half of the 10 GiB free at start, less ")
    monkeypatch.setattr(budget_module, "available_memory", lambda: None)
    assert kv_budget(Settings(), backend) is None  # a system that does not say: no bound, one log line
