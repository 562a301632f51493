"""``on_device(fn)``: run a test's own MLX work on a device thread (``TINYTITAN_DEVICE_CHECK`` is on
for the whole suite, so MLX called from the test's thread raises)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tinytitan.engine.device import thread as device_thread

__all__ = ["EXACT", "on_device"]

T = TypeVar("T")

# Where tests that compare two ways of computing the same tokens run the model (``MlxBackend`` /
# ``MlxBatch``'s ``device``): token-for-token equality of a k-token pass and k one-token steps, or of
# a batch and its rows alone, holds where float sums round alike at every shape — the CPU. On a GPU
# (CUDA runs fp32 matmuls in TF32) they differ by ~1e-3, which flips draws on the tiny random
# model's nearly flat distributions: the same mechanics, other roundings (measured on an H200).
EXACT = "cpu"


def on_device(fn: Callable[[], T], *, worker: Any = None) -> T:
    """``fn()`` on a device thread: through ``worker`` (an engine's ``DeviceWorker``: after the rows
    before it) when given, else on a new thread that claims itself and releases its MLX streams when
    done. Its result, or its own exception raised here unchanged."""
    if worker is not None:
        return worker.run(fn).result()
    out: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        device_thread.claim()
        try:
            out.append(fn())
        except BaseException as exc:
            error.append(exc)
        finally:
            device_thread.release()

    thread = threading.Thread(target=run, name="tinytitan-test-device")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return out[0]
