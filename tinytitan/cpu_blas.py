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
here (``benchmarks/bench_decode.py``). BLIS gets ``BLIS_NUM_THREADS`` = the usable cores unless set.

``blas_state()`` is the one description of it (``--version``, the serve banner): which library is
loaded or will be, and its threads (read with ``threadpoolctl``).

Opt out with ``TINYTITAN_OPENBLAS=0`` (or ``TINYTITAN_BLAS=off``). This module must not import mlx.

Ctrl-C across the re-exec: the new interpreter starts with SIGINT blocked (a signal mask survives
``execve``), so a Ctrl-C while it imports ``site`` is not a "Fatal Python error: init_import_site";
the entry point calls ``release_sigint()`` first thing, and a Ctrl-C pressed meanwhile arrives there,
as a ``KeyboardInterrupt`` the CLI can end on quietly.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import sys
from dataclasses import dataclass

from tinytitan import blis
from tinytitan.cores import usable_cores

__all__ = [
    "BLAS_ENV",
    "OPT_OUT_ENV",
    "REEXEC_ENV",
    "BlasChoiceError",
    "BlasState",
    "blas_state",
    "ensure_openblas",
    "find_blas",
    "find_blis",
    "find_openblas",
    "openblas_active",
    "preload_env",
    "release_sigint",
]

OPT_OUT_ENV = "TINYTITAN_OPENBLAS"
BLAS_ENV = "TINYTITAN_BLAS"  # auto (default) | blis | openblas | off
REEXEC_ENV = "_TINYTITAN_OPENBLAS_REEXEC"
SIGINT_HELD_ENV = "_TINYTITAN_SIGINT_HELD"  # the re-exec blocked SIGINT: release_sigint() unblocks it
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


def _name(path: str) -> str:
    return "BLIS" if "blis" in os.path.basename(path) else "OpenBLAS"


def preload_env(lib: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``lib`` preloaded (ahead of any ``LD_PRELOAD`` already there) and, for BLIS, one
    thread per usable core unless ``BLIS_NUM_THREADS`` says otherwise (its default is one thread),
    and AVX2 kernels on a CPU it does not know (``tinytitan.blis``) unless ``BLIS_ARCH_TYPE`` is set."""
    preload = env.get("LD_PRELOAD", "")
    env = {**env, "LD_PRELOAD": f"{lib}:{preload}" if preload else lib}
    if _name(lib) == "BLIS":
        env.setdefault("BLIS_NUM_THREADS", str(usable_cores()))
        kernels = blis.arch_for(lib) if blis.ARCH_ENV not in env and os.path.exists(lib) else None
        if kernels is not None:
            env[blis.ARCH_ENV], env[blis.KERNELS_ENV] = str(kernels[0]), kernels[1]
    return env


def _plan() -> tuple[str | None, str]:
    """The library ``ensure_openblas`` would preload now, or None and why not."""
    if not sys.platform.startswith("linux"):
        return None, "not Linux"
    if _opted_out() or os.environ.get(BLAS_ENV, "").strip().lower() in _OFF:
        return None, f"{OPT_OUT_ENV}=0 or {BLAS_ENV}=off"
    lib = find_blas()
    if lib is None:
        return None, "install libblis4-pthread or libopenblas0-pthread for a faster one"
    if os.environ.get(REEXEC_ENV) or lib in os.environ.get("LD_PRELOAD", "").split(":"):
        return None, f"the preload of {lib} did not take"
    if "mlx" in sys.modules or "mlx.core" in sys.modules:
        return None, "mlx was imported before the re-exec"
    return lib, ""


def ensure_openblas() -> None:
    """Re-exec this process once with the BLAS of ``find_blas`` preloaded, when possible and wanted.

    Does nothing off Linux, when opted out, when no such BLAS is installed, when it is already
    preloaded, after the one re-exec, or when mlx was already imported (too late to matter).
    """
    release_sigint()  # the re-executed process (a script calling this first thing): Ctrl-C works again
    lib, _ = _plan()
    if lib is None:
        mapped = _mapped() if os.environ.get(REEXEC_ENV) and os.environ.get(blis.ARCH_ENV) else None
        if mapped is not None and "libblis" in mapped:  # BLIS_ARCH_TYPE, ours or the user's
            blis.init(mapped)  # before anything queries it (threadpoolctl): see tinytitan.blis.init
        return
    env = preload_env(lib, dict(os.environ))
    env[REEXEC_ENV] = "1"
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    sys.stderr.flush()
    held = signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if held:  # blocked through the new interpreter's start-up; a press waits for release_sigint()
        env[SIGINT_HELD_ENV] = "1"
    with contextlib.suppress(OSError):  # cannot re-exec: run on with the bundled BLAS
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    if held:  # still this process (the exec failed): Ctrl-C as before
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def release_sigint() -> None:
    """Unblock the SIGINT the re-exec blocked (the entry point, first thing); a Ctrl-C pressed while
    the interpreter started is raised here as ``KeyboardInterrupt``."""
    if os.environ.pop(SIGINT_HELD_ENV, None):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@dataclass(frozen=True)
class BlasState:
    """The BLAS mlx's CPU matmuls use: the Debian one mapped into this process, else the one the
    CLI's re-exec will preload, else the ``mlx[cpu]`` wheel's bundled netlib BLAS (and why)."""

    library: str | None  # "BLIS" or "OpenBLAS"; None: the bundled BLAS
    path: str | None
    loaded: bool  # mapped into this process (False: what a CLI command's re-exec will preload)
    threads: int | None  # the loaded library's thread count (threadpoolctl), when it can tell
    why_bundled: str  # why the bundled BLAS, when library is None

    def describe(self) -> str:
        """One phrase for ``--version`` and the serve banner: "BLIS preloaded, 2 threads"."""
        if self.library is None:
            return f"the bundled BLAS ({self.why_bundled})"
        threads = f", {self.threads} thread{'s' if self.threads > 1 else ''}" if self.threads else ""
        kernels = os.environ.get(blis.KERNELS_ENV) if self.library == "BLIS" and self.loaded else None
        return f"{self.library} preloaded{threads}" + (f", {kernels} kernels" if kernels else "")


def blas_state() -> BlasState:
    """What BLAS this process runs mlx with, or — before the re-exec — will run it with."""
    loaded = _mapped()
    if loaded is not None:
        return BlasState(_name(loaded), loaded, loaded=True, threads=_threads(loaded), why_bundled="")
    lib, why = _plan()
    return BlasState(_name(lib) if lib else None, lib, loaded=False, threads=None, why_bundled=why)


def _mapped() -> str | None:
    """The path of the Debian BLIS or OpenBLAS mapped into this process, if any."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "/lib" in line}
    except OSError:
        return None
    for marker in ("/libblis", "/libopenblas"):  # not numpy's own libscipy_openblas
        for path in sorted(paths):
            if marker in path:
                return path
    return None


def _threads(path: str) -> int | None:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # installed without the cpu extra
        return None
    prefix = "libblis" if _name(path) == "BLIS" else "libopenblas"  # not numpy's libscipy_openblas
    found = ThreadpoolController().select(prefix=prefix).info()
    return int(found[0]["num_threads"]) if found else None


def openblas_active() -> bool:
    """Whether a preloaded BLAS (OpenBLAS or BLIS) is mapped into this process."""
    return _mapped() is not None
