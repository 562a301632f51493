"""Leaving a prefill chunk between two layers, when its row's client has gone (issue 26, item 4).

A lone row's prompt is prefilled in large chunks (``PREFILL_ALONE`` tokens: large products run
faster), and a chunk is one model call that MLX evaluates at the end: a client that left at its start
held the device for the whole chunk — seconds to minutes on a CPU — before the next request could
begin. ``LayerWatch`` makes such a chunk interruptible:

- installed once on a model, it swaps the class of each of ``model.layers`` for a subclass whose
  ``__call__`` first reports to the watch armed on this thread, if any, then calls the layer's own
  (parameters, weights and names are untouched; with no watch armed the cost is one attribute read
  per layer call);
- ``armed(cancelled)`` around a prefill step: before a layer its input — the previous layer's
  output, with that layer's KV cache update — is evaluated and ``cancelled()`` read (``Row.cancelled``,
  set by ``DeviceWorker.cancel`` from the event loop); once it is true the call raises
  ``Interrupted``, so this layer and the rest of the chunk's never run. It looks before every
  ``k``-th layer, ``k`` layers being at most ``LAYER_WORK`` tokens' work (a 2,048-token chunk of a
  30-layer model: every 3rd layer, 205 tokens' work);
- ``chunk_cap()``: the largest chunk for which one layer is at most ``LAYER_WORK`` tokens' work
  (a chunk of ``n`` tokens through one of ``L`` layers is ``n / L`` tokens of whole-model work), so a
  cancelled row leaves within that much work whatever the model;
- ``rewind(cache, tokens)``: the layers a chunk had reached hold it in their KV cache, the others not;
  every layer is trimmed back to the KV state before the chunk, so what is stored in the prompt cache
  is whole.

Evaluating layer by layer instead of once per chunk costs little for a prefill
(``benchmarks/bench_cancel.py``): a layer over a chunk is a large product either way. The last
layer's output is never evaluated here (a prefill only needs its KV cache, not the hidden state past
it: evaluating it would be a 30-layer model's 3 % more work). Decode steps are never armed. Every
method runs on the device thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tinytitan.engine.mlx_lm_adapter import decoder_layers

__all__ = ["LAYER_WORK", "Interrupted", "LayerWatch", "rewind"]

LAYER_WORK = 256  # the most tokens' work a cancelled row may still cost (one layer of one chunk)

_armed = threading.local()  # .watch: the LayerWatch armed on this thread (the device thread), or None
_subclasses: dict[type, type] = {}


class Interrupted(Exception):
    """The armed row was cancelled: its model call stopped after a layer."""


def _watched(cls: type) -> type:
    """``cls`` with a ``__call__`` that reports each call to the watch armed on this thread first."""
    sub = _subclasses.get(cls)
    if sub is None:

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            watch = getattr(_armed, "watch", None)
            if watch is not None:
                watch.before_layer(args[0] if args else None)
            return cls.__call__(self, *args, **kwargs)

        sub = type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__})
        sub.__qualname__ = cls.__qualname__
        _subclasses[cls] = sub
    return sub


class LayerWatch:
    """The per-layer watch over one model; ``layers`` 0 when the model has no ``layers`` to watch."""

    def __init__(self, model: Any) -> None:
        watched = 0
        for layer in decoder_layers(model):
            if type(layer) not in _subclasses.values():
                layer.__class__ = _watched(type(layer))
            watched += 1
        self.layers = watched
        self._cancelled: Callable[[], bool] = lambda: False
        self.layer_calls = 0  # layer calls while armed
        self.looks = 0  # … of which looked at the flag (and evaluated what came before)
        self.interrupts = 0
        self._index = 0  # the next layer's index in the model call under way

    def chunk_cap(self, per_layer: int = LAYER_WORK) -> int | None:
        """The largest lone prefill chunk with at most ``per_layer`` tokens' work per layer (None: no cap)."""
        return per_layer * self.layers if self.layers else None

    @contextmanager
    def armed(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Within the block, a layer call on this thread raises ``Interrupted`` once ``cancelled()``."""
        if not self.layers:
            yield
            return
        self._cancelled = cancelled
        self._index = 0
        _armed.watch = self
        try:
            yield
        finally:
            _armed.watch = None
            self._cancelled = lambda: False

    def before_layer(self, hidden: Any) -> None:
        """Look at the flag before every ``k``-th layer, ``k`` layers of this chunk being at most
        ``LAYER_WORK`` tokens' work (every layer for a chunk of ``chunk_cap()``; fewer evaluations
        for a smaller one)."""
        index, self._index = self._index, (self._index + 1) % self.layers
        self.layer_calls += 1
        tokens = int(hidden.shape[1]) if hidden is not None and len(hidden.shape) == 3 else 1  # (batch, tokens, dim)
        if index % max(1, LAYER_WORK * self.layers // max(1, tokens)):
            return
        import mlx.core as mx

        if hidden is not None:
            mx.eval(hidden)  # the layers before this one are done now, not at the end of the chunk
        self.looks += 1
        if self._cancelled():
            self.interrupts += 1
            raise Interrupted


def rewind(
    cache: Sequence[Any] | None, tokens: Sequence[int] | None, before: int
) -> tuple[list[Any], list[int]] | None:
    """A row's extracted KV cache and tokens back at ``before`` tokens (the KV state before the chunk
    that was interrupted), or None when a layer cannot be trimmed back to it."""
    if not cache or tokens is None or len(tokens) < before:
        return None
    layers = list(cache)
    for layer in layers:
        if not layer.is_trimmable() or layer.size() < before:
            return None
    for layer in layers:
        extra = layer.size() - before
        if extra:
            layer.trim(extra)
    return layers, list(tokens)[:before]
