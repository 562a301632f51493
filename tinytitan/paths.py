"""Where TinyTitan keeps what it builds (converted models, tokenizers, test models)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """``$TINYTITAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tinytitan`` or ``~/.cache/tinytitan``."""
    env = os.environ.get("TINYTITAN_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinytitan"
