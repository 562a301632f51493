"""Where MLX computes and in what dtype: the device a model runs on, and its compute dtype (issue #3).

On the CPU, MLX's bf16/fp16 and quantized matmuls are scalar and single-threaded while fp32
matmuls go through BLAS (OpenBLAS or BLIS when preloaded, see ``tinytitan.cpu_blas``): measured ~20×
faster here. So ``dtype="auto"`` runs fp32 on the CPU (the loader dequantizes a quantized
checkpoint) and keeps the checkpoint as it is on a GPU. ``float32`` / ``bfloat16`` / ``float16``
force a dtype; ``native`` keeps the checkpoint as it is everywhere. Every function but
``compute_dtype`` with a known setting runs on the device thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["DTYPES", "compute_dtype", "device_context", "has_accelerator"]

DTYPES = ("auto", "float32", "bfloat16", "float16", "native")


def has_accelerator() -> bool:
    """Whether mlx has a GPU engine here (Metal or CUDA) beside the CPU: then ``<id>@cpu`` is a real choice."""
    import mlx.core as mx

    for backend in ("metal", "cuda"):
        module = getattr(mx, backend, None)
        is_available = getattr(module, "is_available", None)
        if callable(is_available) and is_available():
            return True
    return False


def device_context(device: str | None) -> Any:
    """A context running mlx work on ``device`` ("cpu"), or on the default device (None).

    It makes ``device`` the default device too, not only the stream: what asks ``mx.default_device()``
    inside (our CPU attention, ``cpu_attention._takes``) must see the CPU for a ``<id>@cpu`` model on a
    GPU machine (measured on an H200: with the stream alone it saw the GPU and never took a chunk).
    Only the device thread runs MLX, so switching the default there and back is safe."""
    if device is None:
        return contextlib.nullcontext()
    return _on(device)


@contextlib.contextmanager
def _on(device: str) -> Iterator[None]:
    import mlx.core as mx

    target, was = getattr(mx, device), mx.default_device()
    mx.set_default_device(target)
    try:
        with mx.stream(target):
            yield
    finally:
        mx.set_default_device(was)


def compute_dtype(setting: str, device: str | None = None) -> str | None:
    """The dtype to run in (None = as the checkpoint is) on ``device`` (None = the default one)."""
    if setting not in DTYPES:
        raise ValueError(f"unknown dtype {setting!r}; choose from {', '.join(DTYPES)}")
    if setting == "native":
        return None
    if setting != "auto":
        return setting
    import mlx.core as mx

    on_cpu = device == "cpu" or mx.default_device() == mx.cpu
    return "float32" if on_cpu else None
