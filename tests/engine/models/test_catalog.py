"""The model catalog: scanning directories and the hub cache for servable models (issue 15)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan.engine.models.catalog import DirectorySource, HubCacheSource, Skipped, scan, source_for
from tinytitan.testing.catalog import B_CONTEXT, B_DEFAULTS, build_catalog, fake_hub_repo, link_model

ROOT = Path(__file__).resolve().parents[2]


def test_a_directory_catalog_lists_each_model_and_skips_the_broken_one(
    tiny_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    (root / ".cache").mkdir()  # hidden: ignored without a word
    (root / "README.txt").write_text("not a model")  # a file: ignored
    with caplog.at_level(logging.WARNING, logger="tinytitan.catalog"):
        catalog = scan([root])
    assert catalog.ids() == ["tiny-a", "tiny-b"]
    assert [s.path.name for s in catalog.skipped] == ["broken"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "broken" in lines[0] and "model_type" in lines[0]
    a, b = catalog.get("tiny-a"), catalog.get("tiny-b")
    assert a is not None and b is not None and catalog.get("nope") is None
    assert a.path == (root / "tiny-a").resolve() and a.format == "mlx" and a.origin == "dir"
    assert (b.info.context_window, b.info.defaults, b.info.default_reasoning) == (B_CONTEXT, B_DEFAULTS, "off")
    assert a.info.context_window == 40960 and a.info.default_reasoning == "on"
    assert scan([root], max_context=1024).get("tiny-a").info.context_window == 1024  # type: ignore[union-attr]


def test_scanning_reads_no_weights_and_imports_no_mlx(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    code = (
        "import sys; from tinytitan.engine.models.catalog import scan\n"
        f"c = scan([{str(root)!r}]); print(c.ids())\n"
        "print(sorted(m for m in ('mlx', 'mlx.core', 'transformers') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['tiny-a', 'tiny-b']", "[]"]


def test_a_missing_root_is_skipped_not_raised(tmp_path: Path) -> None:
    catalog = scan([tmp_path / "nowhere"], quiet=True)
    assert catalog.entries == () and catalog.skipped == (Skipped(tmp_path / "nowhere", "not a directory"),)


def test_an_id_found_twice_is_served_from_its_first_place(tiny_dir: Path, tmp_path: Path) -> None:
    link_model(tiny_dir, tmp_path / "one" / "m")
    link_model(tiny_dir, tmp_path / "two" / "m")
    catalog = scan([tmp_path / "one", tmp_path / "two"], quiet=True)
    assert catalog.ids() == ["m"] and catalog.get("m").path.parent.name == "one"  # type: ignore[union-attr]
    assert "already served from" in catalog.skipped[0].reason


def test_the_hub_cache_serves_repos_under_their_names(tiny_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hub"
    snapshot = fake_hub_repo(cache, "acme/Tiny-Chat", tiny_dir)
    fake_hub_repo(cache, "acme/Other", tiny_dir)
    fake_hub_repo(cache, "zeta/Other", tiny_dir, commit="1" * 40)
    fake_hub_repo(cache, "acme/half-done", None)  # a download that never finished a snapshot
    catalog = scan([HubCacheSource(cache)], quiet=True)
    assert catalog.ids() == ["acme/Other", "Tiny-Chat", "zeta/Other"]  # a shared name: full hub ids
    entry = catalog.get("Tiny-Chat")
    assert entry is not None and entry.origin == "hf" and entry.repo_id == "acme/Tiny-Chat"
    assert entry.path == snapshot
    assert len(catalog.skipped) == 1 and "models--acme--half-done" in catalog.skipped[0].reason


def test_an_absent_hub_cache_is_an_empty_catalog(tmp_path: Path) -> None:
    assert scan([HubCacheSource(tmp_path / "none")]).entries == ()


def test_source_for_reads_hf_as_the_hub_cache(tmp_path: Path) -> None:
    assert isinstance(source_for("hf"), HubCacheSource)
    assert source_for(tmp_path) == DirectorySource(tmp_path)


def test_entries_as_json(tiny_dir: Path, tmp_path: Path) -> None:
    entry = scan([build_catalog(tmp_path / "m", tiny_dir)], quiet=True).get("tiny-b")
    assert entry is not None
    doc = entry.as_json()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["id"] == "tiny-b" and doc["context_window"] == B_CONTEXT and doc["reasoning_levels"] == ["off", "on"]
