"""The model catalog: which installs this machine can serve, with their facts, found without weights.

A catalog is built from sources — a directory of model directories and GGUF files (``--models-dir
DIR``, LM Studio's folder of ``publisher/repo/*.gguf`` included) or the Hugging Face hub cache
(``--models-dir hf``) — scanned in order:

    sources ─► scan ─► CatalogEntry (id, path, format, ModelInfo + what a person compares)
                   └─► Skipped (a directory that is not a loadable model, with a one-line reason)

Each entry carries the ``ModelInfo`` the validator needs (context window, sampling defaults,
reasoning levels, whether a tool call can be forced) and the facts ``tinytitan models`` shows, all
read from config, template and safetensors headers: no weights, no tokenizer.

A source is anything with ``scan(max_context) -> Iterator[CatalogEntry | Skipped]``; an entry's
``format`` names what its path holds: ``"mlx"`` (a model directory) or ``"gguf"`` (a GGUF file,
which the MLX backend converts on first load). ``GgufStoreSource`` is the GGUF files Ollama and
LM Studio downloaded, and the embedded SmolLM2, read from their headers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tinytitan.engine.models.files import ModelUnavailable
from tinytitan.engine.models.gguf.file import is_gguf
from tinytitan.engine.models.mlx.facts import Description, check_loadable, describe, read_facts
from tinytitan.engine.models.mlx.resolve import hub_cache_dir
from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.defaults import applied_defaults

__all__ = [
    "HF",
    "Catalog",
    "CatalogEntry",
    "DirectorySource",
    "GgufStoreSource",
    "HubCacheSource",
    "Skipped",
    "Source",
    "gguf_entry",
    "read_mlx_entry",
    "scan",
    "source_for",
]

log = logging.getLogger("tinytitan.catalog")

HF = "hf"  # the --models-dir word for the Hugging Face hub cache


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One servable install: its id, where it lives, and its facts (read without weights)."""

    id: str
    path: Path
    format: str  # what the path holds: "mlx" (a model directory) or "gguf" (a file)
    origin: str  # where it was found: "dir", "hf", "ollama", "lmstudio" or "embedded"
    info: ModelInfo  # what serving needs
    about: Description  # what a person compares: architecture, parameters, quantization, size, tool calls
    repo_id: str | None = None  # the hub id, for a model from the hub cache

    def as_json(self) -> dict[str, Any]:
        """The facts as ``tinytitan models --json`` and ``GET /v1/models?details=true`` give them."""
        return {
            "id": self.id,
            "architecture": self.about.architecture,
            "parameters": self.about.parameters,
            "quantization": self.about.quantization,
            "size_bytes": self.about.size_bytes,
            "context_window": self.info.context_window,
            "reasoning_levels": list(self.info.reasoning_levels),
            "default_reasoning": self.info.default_reasoning,
            "tool_call_family": self.about.tool_call_family,
            "tool_calls": self.info.tool_calls,
            "freeform_tools": self.info.freeform_grammars,
            "input_modalities": ["text", "image"] if self.info.vision else ["text"],
            "sampling_defaults": {k: {"value": v, "from": f} for k, (v, f) in applied_defaults(self.info).items()},
            "format": self.format,
            "origin": self.origin,
            "repo_id": self.repo_id,
            "path": str(self.path),
        }


@dataclass(frozen=True, slots=True)
class Skipped:
    """A directory a source found that is not a loadable model."""

    path: Path
    reason: str


class Source(Protocol):
    def scan(self, max_context: int | None = None) -> Iterator[CatalogEntry | Skipped]:
        """Every candidate install: an entry, or why it cannot be served."""
        ...


def read_mlx_entry(
    path: Path, model_id: str, *, origin: str, repo_id: str | None = None, max_context: int | None = None
) -> CatalogEntry:
    """The entry for an MLX model directory; ``ModelUnavailable`` (one-line reason) if it cannot load."""
    check_loadable(path)
    facts = read_facts(path, model_id, max_context)
    return CatalogEntry(model_id, path, "mlx", origin, facts.info, describe(facts), repo_id=repo_id)


def _entry_or_skip(path: Path, model_id: str, **kw: Any) -> CatalogEntry | Skipped:
    try:
        return read_mlx_entry(path, model_id, **kw)
    except ModelUnavailable as exc:
        return Skipped(path, exc.message)
    except OSError as exc:
        return Skipped(path, f"unreadable ({exc.strerror or exc})")


def gguf_entry(path: Path, model_id: str, *, origin: str, max_context: int | None = None) -> CatalogEntry | Skipped:
    """The entry for a GGUF file (facts from its header; converted on its first load), or why not."""
    from tinytitan.engine.models.gguf.facts import gguf_facts

    if _SPLIT.search(path.name):
        return Skipped(path, "a split GGUF file: merge its parts first (llama.cpp's `llama-gguf-split --merge`)")
    try:
        info, about = gguf_facts(path, model_id, max_context)
    except ModelUnavailable as exc:
        return Skipped(path, exc.message)
    except OSError as exc:
        return Skipped(path, f"unreadable ({exc.strerror or exc})")
    return CatalogEntry(model_id, path, "gguf", origin, info, about)  # where the user put it (a link too)


_SPLIT = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)


def _ggufs(directory: Path) -> list[Path]:
    """The GGUF model files under ``directory`` (LM Studio's ``publisher/repo/*.gguf``; vision
    projectors, ``mmproj-*``, are not models)."""
    found = (p for p in directory.rglob("*.gguf") if not any(part.startswith(".") for part in p.parts))
    return sorted(p for p in found if not p.name.lower().startswith("mmproj") and is_gguf(p))


@dataclass(frozen=True, slots=True)
class DirectorySource:
    """Every model directory and GGUF file inside ``root`` (symlinks followed; dot-names ignored): a
    directory with a ``config.json`` is one model; ``NAME.gguf`` is served as ``NAME``; a directory
    without a ``config.json`` holding GGUF files (LM Studio's layout) serves each as its path under
    ``root`` without the suffix (``publisher/repo/file``)."""

    root: Path

    def scan(self, max_context: int | None = None) -> Iterator[CatalogEntry | Skipped]:
        if not self.root.is_dir():
            yield Skipped(self.root, "not a directory")
            return
        for child in sorted(self.root.iterdir(), key=lambda p: p.name):
            if child.name.startswith("."):
                continue
            if child.is_file() and child.suffix.lower() == ".gguf":
                if child.name.lower().startswith("mmproj"):
                    continue  # a vision projector, not a model
                if not is_gguf(child):
                    yield Skipped(child, "not a GGUF file (it does not start with the GGUF magic)")
                    continue
                yield gguf_entry(child, child.stem, origin="dir", max_context=max_context)
            elif child.is_dir() and not (child / "config.json").exists() and (files := _ggufs(child)):
                for path in files:
                    model_id = path.relative_to(self.root).with_suffix("").as_posix()
                    yield gguf_entry(path, model_id, origin="dir", max_context=max_context)
            elif child.is_dir():
                yield _entry_or_skip(child.resolve(), child.name, origin="dir", max_context=max_context)


@dataclass(frozen=True, slots=True)
class HubCacheSource:
    """Model repos in the Hugging Face hub cache (the snapshot ``refs/main`` names, else the newest).

    The id is the repo name after the ``/`` (reference §3); when two cached repos share a name,
    both are served under their full hub id instead.
    """

    cache_dir: Path | None = None

    def scan(self, max_context: int | None = None) -> Iterator[CatalogEntry | Skipped]:
        from huggingface_hub import scan_cache_dir
        from huggingface_hub.errors import CacheNotFound

        cache = self.cache_dir or hub_cache_dir()
        try:
            info = scan_cache_dir(cache)
        except CacheNotFound:
            return
        for warning in info.warnings:  # a repo folder huggingface-hub cannot read (an unfinished download)
            yield Skipped(Path(cache), str(warning))
        repos = sorted((r for r in info.repos if r.repo_type == "model"), key=lambda r: r.repo_id)
        names = [r.repo_id.split("/")[-1] for r in repos]
        for repo, name in zip(repos, names, strict=True):
            revision = next((r for r in repo.revisions if "main" in r.refs), None)
            revision = revision or max(repo.revisions, key=lambda r: r.last_modified, default=None)
            if revision is None:
                yield Skipped(repo.repo_path, "no snapshot downloaded")
                continue
            model_id = name if names.count(name) == 1 else repo.repo_id
            yield _entry_or_skip(
                Path(revision.snapshot_path), model_id, origin=HF, repo_id=repo.repo_id, max_context=max_context
            )


@dataclass(frozen=True, slots=True)
class GgufStoreSource:
    """GGUF files other tools downloaded (Ollama's blobs, LM Studio's folder) and the embedded
    SmolLM2, under the ids ``serve --model`` takes (``ollama:qwen3:0.6b``, ``lmstudio:org/repo/file``)."""

    def scan(self, max_context: int | None = None) -> Iterator[CatalogEntry | Skipped]:
        from tinytitan.engine.models.gguf.stores import gguf_store_models

        for row in gguf_store_models():
            yield gguf_entry(Path(row["path"]), row["id"], origin=row["source"], max_context=max_context)


def source_for(spec: str | Path) -> Source:
    """``hf`` → the hub cache; anything else → a directory of model directories."""
    if str(spec) == HF:
        return HubCacheSource()
    return DirectorySource(Path(spec).expanduser())


@dataclass(frozen=True, slots=True)
class Catalog:
    entries: tuple[CatalogEntry, ...]
    skipped: tuple[Skipped, ...] = ()

    def ids(self) -> list[str]:
        return [e.id for e in self.entries]

    def get(self, model_id: str) -> CatalogEntry | None:
        return next((e for e in self.entries if e.id == model_id), None)


def scan(
    sources: Iterable[Source | str | Path] | Sequence[Source], *, max_context: int | None = None, quiet: bool = False
) -> Catalog:
    """Every entry the sources find, in source order; an id seen twice is served from its first
    place. Each skipped directory is logged once (a warning, never an exception) unless ``quiet``."""
    entries: dict[str, CatalogEntry] = {}
    skipped: list[Skipped] = []
    for source in sources:
        src = source_for(source) if isinstance(source, str | Path) else source
        for found in src.scan(max_context):
            if isinstance(found, CatalogEntry) and found.id in entries:
                found = Skipped(found.path, f"id '{found.id}' is already served from {entries[found.id].path}")
            if isinstance(found, Skipped):
                if not quiet:
                    log.warning("catalog: skipping %s: %s", found.path, found.reason)
                skipped.append(found)
            else:
                entries[found.id] = found
    return Catalog(tuple(entries.values()), tuple(skipped))
