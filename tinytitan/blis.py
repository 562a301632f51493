"""BLIS's kernels on a CPU it does not know: choose AVX2 ones instead of its reference C.

BLIS picks a sub-configuration (kernel set) by CPU model at start. Debian 12's BLIS 0.9.0 knows
AMD up to Zen 3, so on a Zen 4 or Zen 5 it falls back to ``generic`` — portable C kernels that
are fine for one-row products (decode reads each weight once either way) but several times slower
for a few rows (batched decode, speculative verify passes) and for prompt chunks
(``benchmarks/bench_decode.py --only blas`` prints the ratios). Every x86-64 CPU with AVX2 and FMA
runs the ``zen3`` (AMD) or ``haswell`` kernels, so when BLIS would choose ``generic`` on such a CPU
``arch_for(lib)`` names the id to put in ``BLIS_ARCH_TYPE`` for the process that preloads it.

The checks run in forked children, because BLIS reads ``BLIS_ARCH_TYPE`` once, at its first call,
and aborts the process when the id names a kernel set this build lacks: one child asks the library
what it would choose and which ids it has names for, another initialises it with the candidate id.
A ``BLIS_ARCH_TYPE`` already set is the user's choice and left alone. This module must not import mlx.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["ARCH_ENV", "KERNELS_ENV", "arch_for", "init", "refusal"]

ARCH_ENV = "BLIS_ARCH_TYPE"
KERNELS_ENV = "_TINYTITAN_BLIS_KERNELS"  # the name of the kernel set chosen, for the banner
_PREFERRED = {"AuthenticAMD": ("zen3", "zen2", "haswell"), "GenuineIntel": ("haswell",)}


def arch_for(lib: str) -> tuple[int, str] | None:
    """The ``BLIS_ARCH_TYPE`` id for ``lib`` on this CPU and its kernel set's name, or None to let
    BLIS choose (it knows the CPU, the CPU lacks AVX2 or FMA, or the build has no AVX2 kernel set)."""
    vendor, flags = _cpu()
    preferred = _PREFERRED.get(vendor, ())
    if not preferred or not {"avx2", "fma"} <= flags:
        return None
    chosen = (_forked(lambda: _choose(lib, preferred)) or "").split()
    if len(chosen) != 2 or _forked(lambda: _start(lib, chosen[0])) != "ok":
        return None
    return int(chosen[0]), chosen[1]


def refusal(lib: str) -> str | None:
    """Why the user's own ``BLIS_ARCH_TYPE`` would abort the process at BLIS's first product (an id
    this build has no kernels for), as one line; None when it is unset, ours, or works."""
    arch = os.environ.get(ARCH_ENV)
    if arch is None or os.environ.get(KERNELS_ENV) or "libblis" not in os.path.basename(lib):
        return None
    if _forked(lambda: _start(lib, arch)) == "ok":
        return None
    return f"{ARCH_ENV}={arch} names no kernel set {lib} has (BLIS would abort); unset it to let BLIS choose"


def init(lib: str) -> None:
    """Initialise ``lib`` now: BLIS 0.9.0 aborts when ``BLIS_ARCH_TYPE`` is set and a query such as
    threadpoolctl's comes before its first product (which initialises it)."""
    import ctypes

    ctypes.CDLL(lib).bli_init()


def _cpu() -> tuple[str, set[str]]:
    vendor, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    vendor = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return vendor, flags


def _choose(lib: str, preferred: tuple[str, ...]) -> str:
    """(In a child.) "ID NAME" of the first preferred kernel set when BLIS would run ``generic``, else ""."""
    import ctypes

    blis = ctypes.CDLL(lib)
    blis.bli_init()
    blis.bli_arch_string.restype = ctypes.c_char_p
    current = int(blis.bli_arch_query_id())
    if blis.bli_arch_string(current) != b"generic":
        return ""
    names = {blis.bli_arch_string(i).decode(): i for i in range(current)}  # generic is the last id
    return next((f"{names[name]} {name}" for name in preferred if name in names), "")


def _start(lib: str, arch: str) -> str:
    """(In a child.) "ok" once ``lib`` has started with kernel set ``arch`` (it aborts if it lacks it)."""
    os.environ[ARCH_ENV] = arch
    init(lib)
    return "ok"


def _forked(fn: Callable[[], str]) -> str | None:
    """What ``fn()`` returned in a forked child, or None when the child did not exit normally."""
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: never returns, and says nothing (BLIS prints why it aborts)
        code = 1
        try:
            import faulthandler

            faulthandler.disable()  # an abort here is an answer, not a crash to report
            os.close(read)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.write(write, fn().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    return answer if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else None
