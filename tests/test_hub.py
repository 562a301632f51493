"""The hub cache helpers behind ``tinytitan models pull / rm``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.hub import cached_repos, find_cached, remove
from tinytitan.testing.catalog import fake_hub_repo


def test_a_served_id_finds_its_repo_and_a_shared_one_asks_for_the_full_id(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    fake_hub_repo(cache, "acme/Tiny", tiny_dir)
    fake_hub_repo(cache, "acme/Other", tiny_dir)
    fake_hub_repo(cache, "zeta/Other", tiny_dir)
    assert [r.repo_id for r in cached_repos(cache)] == ["acme/Other", "acme/Tiny", "zeta/Other"]
    assert find_cached("Tiny", cache).repo_id == "acme/Tiny"
    assert find_cached("zeta/Other", cache).repo_id == "zeta/Other"
    with pytest.raises(ModelUnavailable, match=r"several cached models \(acme/Other, zeta/Other\); give the full"):
        find_cached("Other", cache)


def test_remove_deletes_the_repo_folder(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    fake_hub_repo(cache, "acme/Tiny", tiny_dir)
    remove(find_cached("acme/Tiny", cache), cache)
    assert not (cache / "models--acme--Tiny").exists()
    assert cached_repos(cache) == []
