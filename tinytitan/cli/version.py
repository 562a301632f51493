"""``tinytitan --version``: TinyTitan's version, mlx's and mlx-lm's, and the engine that would run.

Read from the installed packages' metadata and the platform, never by importing mlx (``--version``
and ``--help`` stay fast, and a broken mlx install still gets a version line).
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from tinytitan import __version__

__all__ = ["engine_description", "package_version", "version_text"]

# mlx's platform packages: `pip install mlx` on a Mac, `mlx[cuda]` / `mlx[cuda13]`, `mlx[cpu]` on Linux
_BACKENDS = (
    ("mlx-metal", "Metal (Apple GPU)"),
    ("mlx-cuda-13", "CUDA 13 (NVIDIA GPU)"),
    ("mlx-cuda-12", "CUDA 12 (NVIDIA GPU)"),
    ("mlx-cuda", "CUDA (NVIDIA GPU)"),
    ("mlx-cpu", "CPU"),
)


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def engine_description() -> str:
    """Which mlx build would run a model here, and on what; or why none can."""
    if package_version("mlx") is None:
        return "none: mlx is not installed (pip install 'tinytitan[mlx,cpu]'); only --stub scripts run"
    installed = [(name, what) for name, what in _BACKENDS if package_version(name)]
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mlx on Metal (Apple GPU)"
    gpu = [what for name, what in installed if name != "mlx-cpu"]
    if gpu:
        return f"mlx on {gpu[0]}"
    if sys.platform.startswith("linux"):
        from tinytitan.cpu_blas import BlasChoiceError, blas_state

        try:
            return f"mlx on CPU, {blas_state().describe()}"
        except BlasChoiceError as exc:
            return f"mlx on CPU; {exc}"
    return "mlx on CPU"


def version_text() -> str:
    lines = [f"tinytitan {__version__}"]
    for name in ("mlx", "mlx-lm"):
        found = package_version(name)
        extra = [f"{p} {package_version(p)}" for p, _ in _BACKENDS if name == "mlx" and package_version(p)]
        shown = found or "not installed"
        lines.append(f"{name} {shown}" + (f" ({', '.join(extra)})" if extra else ""))
    lines.append(f"engine: {engine_description()}")
    lines.append(f"python {platform.python_version()} on {platform.system()} {platform.machine()}")
    return "\n".join(lines)
