"""Where TinyTitan keeps its own files: the one module that decides (and reads the environment for it).

- the cache (converted GGUF models, test models and tokenizers): ``$TINYTITAN_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/tinytitan``, else ``~/.cache/tinytitan`` — on macOS too;
- the data directory (the chat history): ``$XDG_DATA_HOME/tinytitan``, else
  ``~/.local/share/tinytitan`` — on macOS too;
- the memory journals' default (``--memory-dir`` / ``TINYTITAN_MEMORY_DIR`` replace it): the
  platform's data directory, ``~/Library/Application Support/tinytitan/memory`` on macOS and
  ``memory`` in the data directory elsewhere.

These are the places earlier releases used, and people have data there, so they stay as they are
(``platformdirs`` would move the cache and the chat history on macOS). Each is read from the
environment when asked, not at import time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["APP", "cache_root", "chat_history_path", "data_root", "default_memory_dir"]

APP = "tinytitan"


def _home(env: Mapping[str, str], variable: str, *default: str) -> Path:
    value = env.get(variable)
    return Path(value) if value else Path.home().joinpath(*default)


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$TINYTITAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tinytitan`` or ``~/.cache/tinytitan``."""
    own = env.get("TINYTITAN_CACHE_DIR")
    if own:
        return Path(own)
    return _home(env, "XDG_CACHE_HOME", ".cache") / APP


def data_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_DATA_HOME/tinytitan`` or ``~/.local/share/tinytitan``."""
    return _home(env, "XDG_DATA_HOME", ".local", "share") / APP


def chat_history_path(env: Mapping[str, str] = os.environ) -> Path:
    """The file ``tinytitan chat`` keeps its input history in."""
    return data_root(env) / "chat_history"


def default_memory_dir(env: Mapping[str, str] = os.environ) -> str:
    """Where memory journals live by default: the user's data directory (XDG on Linux)."""
    if sys.platform == "darwin":
        return str(Path.home() / "Library" / "Application Support" / APP / "memory")
    return str(data_root(env) / "memory")
