"""A fast CPU engine on Linux: preload Debian's BLIS or OpenBLAS under the mlx[cpu] wheel.

The ``mlx[cpu]`` wheel bundles the reference netlib BLAS; with a Debian BLAS preloaded, libmlx
resolves ``cblas_sgemm`` from it instead (fp32 matmuls several times faster; design.md "Facts
measured"). ``LD_PRELOAD`` only takes effect at process start, so the CLI calls
``ensure_openblas()`` first thing in ``serve`` / ``count-tokens`` / ``compact`` — before mlx is
imported — and the process re-executes itself once with the variable set.

Which library: BLIS (``libblis4-pthread``) when installed, else OpenBLAS (``libopenblas0-pthread``);
``TINYTITAN_BLAS=blis|openblas`` insists on one. Decoding multiplies one row (or a few, batched) by
every weight matrix: OpenBLAS 0.3.21 (Debian 12) packs the whole weight matrix into a buffer on
every such call (``sgemm_incopy`` dominates a decode profile) and so decodes at a fraction of the
memory bandwidth, while BLIS's skinny-matrix path reads the weights in place — decode ~4× faster
here (``benchmarks/bench_decode.py``). BLIS gets ``BLIS_NUM_THREADS`` = the CPU count unless set.

Opt out with ``TINYTITAN_OPENBLAS=0`` (or ``TINYTITAN_BLAS=off``). This module must not import mlx.
"""

from __future__ import annotations

import glob
import os
import sys

__all__ = [
    "BLAS_ENV",
    "OPT_OUT_ENV",
    "REEXEC_ENV",
    "BlasChoiceError",
    "blas_active",
    "ensure_openblas",
    "find_blas",
    "find_blis",
    "find_openblas",
    "openblas_active",
]

OPT_OUT_ENV = "TINYTITAN_OPENBLAS"
BLAS_ENV = "TINYTITAN_BLAS"  # auto (default) | blis | openblas | off
REEXEC_ENV = "_TINYTITAN_OPENBLAS_REEXEC"
_PATTERNS = (
    "/usr/lib/*/openblas-pthread/libopenblas.so.0",
    "/usr/lib/openblas-pthread/libopenblas.so.0",
)
_BLIS_PATTERNS = (
    "/usr/lib/*/blis-pthread/libblis.so.4",
    "/usr/lib/blis-pthread/libblis.so.4",
)
_OFF = {"0", "off", "false", "no"}
_CHOICES = ("auto", "blis", "openblas", "off")


class BlasChoiceError(ValueError):
    """``TINYTITAN_BLAS`` names no BLAS this module knows; the message lists the accepted values."""


def _first(patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


def find_openblas() -> str | None:
    """The path of Debian's pthread OpenBLAS, if installed."""
    return _first(_PATTERNS)


def find_blis() -> str | None:
    """The path of Debian's pthread BLIS, if installed."""
    return _first(_BLIS_PATTERNS)


def find_blas() -> str | None:
    """The library to preload: ``TINYTITAN_BLAS`` if it names one, else BLIS when installed, else OpenBLAS."""
    raw = os.environ.get(BLAS_ENV, "auto")
    choice = raw.strip().lower() or "auto"
    if choice not in _CHOICES and choice not in _OFF:
        raise BlasChoiceError(f"{BLAS_ENV}={raw} is not a BLAS choice; use {', '.join(_CHOICES)} (or unset it)")
    if choice in _OFF:
        return None
    if choice == "openblas":
        return find_openblas()
    if choice == "blis":
        return find_blis()
    return find_blis() or find_openblas()


def _opted_out() -> bool:
    return os.environ.get(OPT_OUT_ENV, "").strip().lower() in _OFF


def ensure_openblas() -> None:
    """Re-exec this process once with the BLAS of ``find_blas`` preloaded, when possible and wanted.

    Does nothing off Linux, when opted out, when no such BLAS is installed, when it is already
    preloaded, after the one re-exec, or when mlx was already imported (too late to matter).
    """
    if not sys.platform.startswith("linux") or _opted_out() or os.environ.get(REEXEC_ENV):
        return
    lib = find_blas()
    if lib is None:
        return
    preload = os.environ.get("LD_PRELOAD", "")
    if lib in preload.split(":") or "mlx" in sys.modules or "mlx.core" in sys.modules:
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    env[REEXEC_ENV] = "1"
    if "blis" in os.path.basename(lib):
        env.setdefault("BLIS_NUM_THREADS", str(os.cpu_count() or 1))
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    except OSError:  # cannot re-exec: run on with the bundled BLAS
        return


def blas_active() -> str | None:
    """Which preloaded BLAS is mapped into this process ("BLIS", "OpenBLAS"), if any (the banner)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return None
    if "/libblis" in text:
        return "BLIS"
    if "/libopenblas" in text:
        return "OpenBLAS"
    return None


def openblas_active() -> bool:
    """Whether a preloaded BLAS (OpenBLAS or BLIS) is mapped into this process."""
    return blas_active() is not None
