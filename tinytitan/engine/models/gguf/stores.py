"""GGUF files other local tools already downloaded: Ollama's blob store and LM Studio's models folder.

- Ollama keeps ``manifests/<registry>/<namespace>/<model>/<tag>`` (JSON; the layer whose media type
  is ``application/vnd.ollama.image.model`` names the weights) and ``blobs/sha256-<hex>`` (the GGUF
  file itself, without a suffix) under ``$OLLAMA_MODELS``, else ``~/.ollama/models`` (or the Linux
  service's ``/usr/share/ollama/.ollama/models``).
- LM Studio keeps ``<publisher>/<repo>/*.gguf`` under ``~/.lmstudio/models`` (older versions:
  ``~/.cache/lm-studio/models``); vision projectors (``mmproj-*``) are not models and are left out.

Each found file is a row ``{"id", "size_bytes", "path", "source"}``; ``serve --model PATH`` serves it.
No mlx import here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tinytitan.engine.models.gguf.file import is_gguf

__all__ = ["embedded_rows", "gguf_store_models", "lmstudio_models", "ollama_models"]

_OLLAMA_MODEL = "application/vnd.ollama.image.model"
_OLLAMA_REGISTRY = "registry.ollama.ai"


def _ollama_roots() -> list[Path]:
    if os.environ.get("OLLAMA_MODELS"):
        return [Path(os.environ["OLLAMA_MODELS"]).expanduser()]
    return [Path.home() / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def _ollama_name(parts: tuple[str, ...]) -> str:
    registry, namespace, model, tag = parts[-4:]
    name = f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
    return name if registry == _OLLAMA_REGISTRY else f"{registry}/{name}"


def ollama_models() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for root in _ollama_roots():
        manifests = root / "manifests"
        if not manifests.is_dir():
            continue
        for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
            parts = manifest.relative_to(manifests).parts
            if len(parts) < 4:
                continue
            try:
                layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers", [])
            except (OSError, ValueError, AttributeError):
                continue
            for layer in layers:
                if not isinstance(layer, dict) or layer.get("mediaType") != _OLLAMA_MODEL:
                    continue
                blob = root / "blobs" / str(layer.get("digest", "")).replace(":", "-")
                if blob.is_file() and is_gguf(blob):
                    rows.append(_row(f"ollama:{_ollama_name(parts)}", blob, "ollama"))
    return rows


def lmstudio_models() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    home = Path.home()
    for root in (home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.gguf")):
            if path.name.lower().startswith("mmproj") or not is_gguf(path):
                continue
            rows.append(_row(f"lmstudio:{path.relative_to(root).with_suffix('').as_posix()}", path, "lmstudio"))
    return rows


def embedded_rows() -> list[dict[str, Any]]:
    from tinytitan.engine.models.mlx.embedded import EMBEDDED_NAME, embedded_gguf

    path = embedded_gguf()
    return [_row(f"embedded:{EMBEDDED_NAME}", path, "embedded")] if path else []


def gguf_store_models() -> list[dict[str, Any]]:
    """Every GGUF model found in Ollama's and LM Studio's stores, and the embedded one."""
    return ollama_models() + lmstudio_models() + embedded_rows()


def _row(name: str, path: Path, source: str) -> dict[str, Any]:
    return {"id": name, "size_bytes": path.stat().st_size, "path": str(path), "source": source}
