"""Which thread is the device thread (the one that may call MLX)."""

from __future__ import annotations

import threading

__all__ = ["claim", "is_device_thread"]

_owner: threading.Thread | None = None


def claim() -> None:
    """The calling thread becomes the device thread."""
    global _owner
    _owner = threading.current_thread()


def is_device_thread() -> bool:
    return _owner is not None and threading.current_thread() is _owner
