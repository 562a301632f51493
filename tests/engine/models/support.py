"""Running one request through a backend's batch by hand (no device thread, no event loop)."""

from __future__ import annotations

from tinytitan.engine.models.base import Backend
from tinytitan.engine.request import ValidatedRequest
from tinytitan.testing.batches import collect, row


def run_batch(backend: Backend, request: ValidatedRequest, max_new: int | None = None) -> str:
    """The text one row of ``request`` generates; its error raised."""
    (tokens,) = collect(backend.open_batch(), [row(backend.render(request), max_new or request.cap, request=request)])
    return "".join(str(t) for t in tokens)
