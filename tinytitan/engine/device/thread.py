"""The device thread: the one thread that may call MLX, and a debug mode that enforces it.

MLX streams and its compile cache are per thread, so the engine calls MLX from one device worker
only. The worker calls ``claim()`` when it starts; ``is_device_thread()`` tells code that acts only
there (the NumPy CPU attention) whether it is. A thread's claim ends with the thread; several
engines in one process (the tests) each have their own device thread.

``claimed()`` is the escape hatch for code that is the device itself while no worker runs (a test's
own MLX work, building the tiny model, a skeleton built before the engine starts): it refuses, with
a ``RuntimeError``, while a device worker of this process is alive — two threads calling MLX at once
is what the rule exists to prevent; such work goes to the worker (``DeviceWorker.run``).

``TINYTITAN_DEVICE_CHECK=1`` turns on the check: ``install_check()`` (the device worker and the
test session call it) wraps every function of ``mlx.core`` and its submodules (``fast``, ``random``,
``linalg``, ``fft``, ``metal``, ``cuda``, ``distributed``) and the methods of ``mx.array`` (``item``,
``tolist``, ``__array__``, the operators, ``.T`` …), so that a call from any other thread raises a
``RuntimeError`` naming the function and the thread before MLX does anything. On the device thread
a checked call costs 0.6–1 µs more (a busy 2-core machine; a decode step of the tests' tiny model
makes ~80 of them: ``benchmarks/bench_device_check.py``). Without the variable nothing is wrapped.

Still allowed off the device thread, because none of it builds a graph, allocates on a device or
touches a stream: importing mlx and mlx-lm (``mx.compile`` used as a decorator at import only wraps
a function; what it returns is checked when called; ``mx.custom_function`` is a class, left as it
is, and the MLX calls in its body are checked), building an array from Python data with
``mx.array(...)`` (nanobind constructs it without a Python-level hook, so it cannot be wrapped),
reading an array's ``shape`` / ``dtype`` / ``ndim`` / ``size`` / ``nbytes`` / ``len()``,
``isinstance``, and the pure queries in ``ALLOWED`` (dtypes, shapes, which devices exist) and
joining a distributed group (``mx.distributed.init``, on ``serve``'s main thread). Not caught: the
buffer protocol (``np.asarray(a)``, ``memoryview(a)`` read an array without a Python call), and
functions a module bound before the check went in.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = [
    "ALLOWED",
    "CHECK_ENV",
    "check_installed",
    "claim",
    "claimed",
    "install_check",
    "is_device_thread",
    "release",
    "remove_check",
    "running_workers",
]

CHECK_ENV = "TINYTITAN_DEVICE_CHECK"

# pure queries of dtypes, shapes and the machine, and the thread-local stream mlx-lm makes at import
ALLOWED = frozenset(
    {
        "default_device",
        "new_thread_local_stream",
        "finfo",
        "iinfo",
        "issubdtype",
        "isdtype",
        "can_cast",
        "result_type",
        "broadcast_shapes",
        "is_available",
        "device_count",
        "device_info",
        "get_printoptions",
        "init",  # mx.distributed.init: joins the launched group (serve's main thread, before any device work)
    }
)
_TRANSFORMS = frozenset({"compile", "checkpoint", "grad", "value_and_grad", "vmap"})  # they return a function
_SUBMODULES = ("fast", "random", "linalg", "fft", "metal", "cuda", "distributed")
# construction (not interceptable, see above) and what reads an array's metadata only
_ARRAY_KEPT = frozenset({"__new__", "__init__", "__len__", "shape", "dtype", "ndim", "size", "itemsize", "nbytes"})

_local = threading.local()
_lock = threading.Lock()
_workers: set[threading.Thread] = set()  # threads that claim()ed the device and have not released it
_originals: list[tuple[Any, str, Any]] = []  # (owner, name, what it was) for every wrapped callable


def claim() -> None:
    """Make the calling thread a device thread (the worker calls it first thing, on its own thread)."""
    _local.device = True
    with _lock:
        _workers.add(threading.current_thread())


def release() -> None:
    """The device worker's last act, on its own thread: free the MLX streams this thread made and end
    its claim. A thread that ran MLX (a compiled function: mlx-lm's) and ends without this makes the
    process abort at exit about one run in two ("terminate called without an active exception"),
    joined or not (``tests/engine/device/test_thread.py``, ``tests/cli/test_exit.py``)."""
    if "mlx.core" in sys.modules:
        import mlx.core as mx

        mx.synchronize()
        mx.clear_streams()
    _local.device = False
    with _lock:
        _workers.discard(threading.current_thread())


def is_device_thread() -> bool:
    return getattr(_local, "device", False)


def running_workers() -> list[str]:
    """The names of the live threads other than this one that hold the device (``claim()``)."""
    me = threading.current_thread()
    with _lock:
        _workers.difference_update([t for t in _workers if not t.is_alive()])  # ended without release()
        return sorted(t.name for t in _workers if t is not me)


@contextmanager
def claimed(*, beside_workers: bool = False) -> Iterator[None]:
    """The calling thread is a device thread for the block (tests and benchmarks that are the device);
    ``RuntimeError`` while another thread holds the device (a running device worker).

    ``beside_workers``: a test's own MLX work in a process that runs other engines' workers too (the
    suite runs many servers in one process, each worker with its own streams) — never server code."""
    was = is_device_thread()
    if not was and not beside_workers and (others := running_workers()):
        raise RuntimeError(
            f"the device is held by {', '.join(others)}: MLX work goes through the device worker "
            "(DeviceWorker.run), not device_thread.claimed()"
        )
    _local.device = True
    try:
        yield
    finally:
        _local.device = was


def check_installed() -> bool:
    return bool(_originals)


def install_check(*, force: bool = False) -> bool:
    """Wrap MLX so a call off a device thread raises, when ``TINYTITAN_DEVICE_CHECK`` is set (or
    ``force``); idempotent. Whether the check is on. Install it before mlx-lm is imported where you
    can: a module that took a function with ``from mlx.core import f`` keeps the unwrapped one."""
    if not (force or os.environ.get(CHECK_ENV, "").strip().lower() not in ("", "0", "off", "false", "no")):
        return check_installed()
    import mlx.core as mx

    with _lock:
        if not _originals:
            _wrap_module(mx, "mlx.core")
            for name in _SUBMODULES:
                sub = getattr(mx, name, None)
                if isinstance(sub, ModuleType):
                    _wrap_module(sub, f"mlx.core.{name}")
            for name, value in sorted(vars(mx.array).items()):
                if name in _ARRAY_KEPT:
                    continue
                if isinstance(value, property) and value.fget is not None:  # T, mT, real, imag, at
                    _replace(mx.array, name, property(_checked(value.fget, f"mlx.core.array.{name}")))
                elif callable(value) and not isinstance(value, type):
                    _replace(mx.array, name, _checked(value, f"mlx.core.array.{name}"))
    return True


def remove_check() -> None:
    """Put every wrapped callable back (the tests of the check itself)."""
    with _lock:
        while _originals:
            owner, name, original = _originals.pop()
            setattr(owner, name, original)


def _wrap_module(module: ModuleType, prefix: str) -> None:
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or name in ALLOWED or isinstance(value, (type, ModuleType)) or not callable(value):
            continue
        wrapped = _transform(value, f"{prefix}.{name}") if name in _TRANSFORMS else _checked(value, f"{prefix}.{name}")
        _replace(module, name, wrapped)


def _replace(owner: Any, name: str, wrapped: Any) -> None:
    _originals.append((owner, name, getattr(owner, name)))
    setattr(owner, name, wrapped)


def _refuse(name: str) -> RuntimeError:
    thread = threading.current_thread().name
    return RuntimeError(
        f"{name} called on thread {thread!r}, which is not the device thread ({CHECK_ENV} is set): "
        "only the device worker may call MLX"
    )


def _checked(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(function, assigned=("__name__", "__doc__"))  # nanobind's may have no __qualname__
    def call(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_local, "device", False):
            raise _refuse(name)
        return function(*args, **kwargs)

    return call


def _transform(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``mx.compile`` and its kind run anywhere (decorators at import); what they return is checked."""

    @functools.wraps(function, assigned=("__name__", "__doc__"))
    def call(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        return _checked(result, f"{name}(…)") if callable(result) else result

    return call
