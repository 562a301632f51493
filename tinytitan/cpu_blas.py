"""A fast CPU engine on Linux: preload Debian's OpenBLAS under the mlx[cpu] wheel.

The ``mlx[cpu]`` wheel bundles the reference netlib BLAS; with Debian's ``libopenblas0-pthread``
preloaded, libmlx resolves ``cblas_sgemm`` from OpenBLAS instead (fp32 matmuls several times
faster; design.md "Facts measured"). ``LD_PRELOAD`` only takes effect at process start, so the CLI
calls ``ensure_openblas()`` first thing in ``serve`` / ``count-tokens`` / ``compact`` — before
mlx is imported — and the process re-executes itself once with the variable set.

Opt out with ``TINYTITAN_OPENBLAS=0``. This module must not import mlx.
"""

from __future__ import annotations

import glob
import os
import sys

__all__ = ["OPT_OUT_ENV", "REEXEC_ENV", "ensure_openblas", "find_openblas", "openblas_active"]

OPT_OUT_ENV = "TINYTITAN_OPENBLAS"
REEXEC_ENV = "_TINYTITAN_OPENBLAS_REEXEC"
_PATTERNS = (
    "/usr/lib/*/openblas-pthread/libopenblas.so.0",
    "/usr/lib/openblas-pthread/libopenblas.so.0",
)
_OFF = {"0", "off", "false", "no"}


def find_openblas() -> str | None:
    """The path of Debian's pthread OpenBLAS, if installed."""
    for pattern in _PATTERNS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


def _opted_out() -> bool:
    return os.environ.get(OPT_OUT_ENV, "").strip().lower() in _OFF


def ensure_openblas() -> None:
    """Re-exec this process once with OpenBLAS preloaded, when that is possible and wanted.

    Does nothing off Linux, when opted out, when OpenBLAS is not installed, when it is already
    preloaded, after the one re-exec, or when mlx was already imported (too late to matter).
    """
    if not sys.platform.startswith("linux") or _opted_out() or os.environ.get(REEXEC_ENV):
        return
    lib = find_openblas()
    if lib is None:
        return
    preload = os.environ.get("LD_PRELOAD", "")
    if lib in preload.split(":") or "mlx" in sys.modules or "mlx.core" in sys.modules:
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    env[REEXEC_ENV] = "1"
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    except OSError:  # cannot re-exec: run on with the bundled BLAS
        return


def openblas_active() -> bool:
    """Whether an OpenBLAS library is mapped into this process (for the startup banner)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("/libopenblas" in line for line in maps)
    except OSError:
        return False
