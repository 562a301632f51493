"""The converted copies of GGUF files under ``<cache>/gguf/<digest>-v<N>/``, as a person manages them.

Serving a GGUF file converts it once into a model directory (``tinytitan.engine.models.gguf.convert``);
the copy stays in the cache (~98 MB for the embedded SmolLM2). ``tinytitan models`` lists the copies
(``converted_copies``) beside the models, and ``tinytitan models rm`` removes one (``remove_copy``):
the next load of that GGUF file converts it again. The GGUF file itself is never touched (it belongs
to Ollama, LM Studio or the embedded package). No heavy import: ``tinytitan models`` stays fast.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tinytitan.paths import cache_root

__all__ = ["SOURCE_FILE", "ConvertedCopy", "converted_copies", "gguf_cache_dir", "remove_copy"]

SOURCE_FILE = "tinytitan-gguf.json"  # what the copy was converted from, written by the conversion


def gguf_cache_dir() -> Path:
    return cache_root() / "gguf"


@dataclass(frozen=True, slots=True)
class ConvertedCopy:
    path: Path  # the model directory
    gguf: str  # the GGUF file it was converted from ("" when the copy does not say)
    size_bytes: int

    @property
    def name(self) -> str:
        return self.path.name  # <digest>-v<N>: how `models rm` names a copy whose GGUF file is gone

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "gguf": self.gguf or None, "size_bytes": self.size_bytes, "path": str(self.path)}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def converted_copies(root: Path | None = None) -> list[ConvertedCopy]:
    """Every finished conversion in the cache (half-written ``.convert-*`` directories are not copies)."""
    root = root or gguf_cache_dir()
    if not root.is_dir():
        return []
    copies = []
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or not (path / "config.json").is_file():
            continue
        try:
            source = json.loads((path / SOURCE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            source = {}
        gguf = source.get("gguf") if isinstance(source, dict) else None
        copies.append(ConvertedCopy(path, gguf if isinstance(gguf, str) else "", _size(path)))
    return copies


def remove_copy(copy: ConvertedCopy) -> int:
    """Delete the copy; the bytes freed."""
    shutil.rmtree(copy.path)
    return copy.size_bytes
