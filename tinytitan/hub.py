"""The Hugging Face hub cache: download a model into it, find a cached one, remove one.

``tinytitan models pull ORG/NAME`` and ``tinytitan models rm ID`` are thin over these. The cache is
huggingface-hub's own (``HF_HUB_CACHE`` / ``HF_HOME``), the one ``serve --model ORG/NAME`` and
``--models-dir hf`` read, so a pulled model is servable at once. Downloads resume: huggingface-hub
keeps a partial file and continues it on the next pull. Every failure is a ``ModelUnavailable``
whose message names the id and the way out.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.mlx.resolve import hub_cache_dir, hub_offline, hub_snapshot

__all__ = ["CachedRepo", "cached_repos", "find_cached", "pull", "remove"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True, slots=True)
class CachedRepo:
    repo_id: str
    path: Path  # the repo's folder in the cache (models--org--name)
    size_bytes: int
    revisions: tuple[str, ...]  # commit hashes held


def _way_out(repo_id: str) -> str:
    return (
        f"connect to the network and run `tinytitan models pull {repo_id}` again (a partial download resumes), "
        "or copy the model directory to this machine and serve it with --models-dir DIR or --model DIR"
    )


def pull(repo_id: str, cache_dir: Path | None = None) -> tuple[Path, bool]:
    """Download ``repo_id`` (the files an MLX model needs) into the cache, with huggingface-hub's
    progress bars. Returns the snapshot directory and whether the hub was reached (False offline,
    when the cached copy is returned as it is)."""
    if not _HUB_ID.match(repo_id):
        raise ModelUnavailable(f"'{repo_id}' is not a hub id; give ORG/NAME (e.g. mlx-community/Qwen3-0.6B-4bit)")

    def unreachable(_cache: Path, why: str) -> str:
        return f"cannot pull '{repo_id}': {why}; {_way_out(repo_id)}"

    return hub_snapshot(repo_id, cache_dir=cache_dir, unreachable=unreachable), not hub_offline()


def cached_repos(cache_dir: Path | None = None) -> list[CachedRepo]:
    """Every model repo in the cache."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache_dir or hub_cache_dir())
    except CacheNotFound:
        return []
    return [
        CachedRepo(r.repo_id, Path(r.repo_path), r.size_on_disk, tuple(sorted(v.commit_hash for v in r.revisions)))
        for r in sorted(info.repos, key=lambda r: r.repo_id)
        if r.repo_type == "model"
    ]


def find_cached(name: str, cache_dir: Path | None = None) -> CachedRepo:
    """The cached repo ``name`` means: a full hub id, or the served id (the name after the ``/``)."""
    repos = cached_repos(cache_dir)
    exact = [r for r in repos if r.repo_id == name]
    matches = exact or [r for r in repos if r.repo_id.split("/")[-1] == name]
    if len(matches) == 1:
        return matches[0]
    where = cache_dir or hub_cache_dir()
    if matches:
        options = ", ".join(r.repo_id for r in matches)
        raise ModelUnavailable(f"'{name}' names several cached models ({options}); give the full ORG/NAME")
    held = ", ".join(r.repo_id for r in repos) or "nothing"
    raise ModelUnavailable(f"'{name}' is not in the Hugging Face cache ({where}); it holds: {held}")


def remove(repo: CachedRepo, cache_dir: Path | None = None) -> int:
    """Delete every cached revision of ``repo`` (and its folder); returns the bytes freed."""
    from huggingface_hub import scan_cache_dir

    if not repo.revisions:  # a download that never finished a snapshot: only blobs
        shutil.rmtree(repo.path)
        return repo.size_bytes
    info = scan_cache_dir(cache_dir or hub_cache_dir())
    strategy = info.delete_revisions(*repo.revisions)
    strategy.execute()
    return int(strategy.expected_freed_size)
