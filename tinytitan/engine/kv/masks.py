"""A lone row's decode step attends without a mask.

mlx-lm's ``BatchKVCache`` builds, at every forward pass, a boolean mask over every position it holds,
each row's left padding masked out, and the attention applies it. A batch of one row has no padding,
and one new token may see every position: the mask is all true, the same as none — but building and
applying it is most of what a one-row ``BatchGenerator`` step costs beyond mlx-lm's ``generate_step``
(a one-row batch cache without it steps at 1.04× ``generate_step`` where with it 0.93×, on
``benchmarks/bench_steps.py``'s fast-device stand-in; on a 0.6B model on this CPU it is noise beside
the weights). ``lone_row`` says when; the ``make_mask`` that ``install`` gives mlx-lm's
``BatchKVCache`` for the process (once; through ``mlx_lm_adapter.route_batch_mask``) answers None
there and the cache's own mask everywhere else: several rows, a row with padding, a chunk of several
tokens, a sliding window, a caller that asks for an array. ``kv/cache.py``'s quantized batch cache
asks ``lone_row`` too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["install", "installed", "lone_row", "uninstall"]

_lock = threading.Lock()
_original: Callable[..., Any] | None = None  # mlx-lm's own make_mask while ours is installed


def lone_row(cache: Any, n: int, *, return_array: bool = False, window_size: int | None = None) -> bool:
    """Whether ``n`` new tokens in ``cache`` (a batch cache: ``left_padding`` per row) need no mask."""
    if n != 1 or return_array or window_size is not None:
        return False
    padding = cache.left_padding
    return int(padding.size) == 1 and int(padding.item()) == 0


def _make_mask(cache: Any, N: int, return_array: bool = False, **kwargs: Any) -> Any:
    if lone_row(cache, N, return_array=return_array, window_size=kwargs.get("window_size")):
        return None
    assert _original is not None
    return _original(cache, N, return_array=return_array, **kwargs)


def install() -> None:
    """mlx-lm's ``BatchKVCache`` steps a lone row without a mask (idempotent; any thread)."""
    global _original
    from tinytitan.engine import mlx_lm_adapter

    with _lock:
        if _original is None:
            _original = mlx_lm_adapter.route_batch_mask(_make_mask)


def uninstall() -> None:
    """mlx-lm's own ``make_mask`` again (tests)."""
    global _original
    from tinytitan.engine import mlx_lm_adapter

    with _lock:
        if _original is not None:
            mlx_lm_adapter.route_batch_mask(_original)
            _original = None


def installed() -> bool:
    return _original is not None
