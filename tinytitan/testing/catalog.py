"""A catalog directory for tests and benchmarks: two servable models and one broken directory.

``build_catalog(root, model_dir)`` lays out, from one built model directory (the weights linked,
not copied):

    root/tiny-a/   the model as built
    root/tiny-b/   the same weights, a smaller context window, other sampling defaults and
                   thinking off by default (so a test can tell which model's facts were used)
    root/broken/   a config.json without a model_type (skipped, with one log line)

``fake_hub_repo`` lays a model out as huggingface-hub caches it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["B_CONTEXT", "B_DEFAULTS", "build_catalog", "fake_hub_repo", "link_model"]

B_CONTEXT = 4096
B_DEFAULTS = {"temperature": 0.2, "top_p": 0.8, "top_k": 5}


def link_model(source: Path, dest: Path) -> Path:
    """``dest`` holding ``source``'s files: weights symlinked, small files copied (to be edited)."""
    dest.mkdir(parents=True)
    for item in source.iterdir():
        if item.suffix == ".safetensors":
            (dest / item.name).symlink_to(item.resolve())
        elif item.is_file():
            shutil.copy(item, dest / item.name)
    return dest


def _edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.update(changes)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def build_catalog(root: Path, model_dir: Path) -> Path:
    """Write the catalog described above under ``root`` (created); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    link_model(model_dir, root / "tiny-a")
    b = link_model(model_dir, root / "tiny-b")
    _edit_json(b / "config.json", max_position_embeddings=B_CONTEXT)
    _edit_json(b / "generation_config.json", **B_DEFAULTS)
    _edit_json(b / "tinytitan.json", default_reasoning="off")
    broken = root / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}", encoding="utf-8")
    return root


def fake_hub_repo(cache: Path, repo_id: str, model_dir: Path | None, *, commit: str = "0" * 40) -> Path:
    """A repo laid out as huggingface-hub writes it: refs/main -> snapshots/<commit>/ (files linked)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "blobs").mkdir()
    if model_dir is None:
        return repo
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for item in model_dir.iterdir():
        (snapshot / item.name).symlink_to(item.resolve())
    return snapshot
