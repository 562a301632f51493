"""Finding the distributed group ``mlx.launch`` started this process in, and which parallelism to use.

``mlx.launch`` (ring over TCP or Thunderbolt, MPI, JACCL over RDMA) starts one process per rank and
tells each, through its environment, who it is and how to reach the others. ``detect`` looks at that
environment first — without importing MLX, so a plain ``tinytitan serve`` pays nothing — and then
asks ``mx.distributed.init`` for the group. A group of size 1 is no group: the server runs as usual.

Parallelism is what mlx-lm's model classes offer (the same tests ``mlx_lm.utils.sharded_load`` makes):
``tensor`` when the model has a ``shard`` method (each rank holds a slice of every layer; two
``all_sum`` per layer per token), ``pipeline`` when its inner model has ``pipeline`` (each rank holds a
run of whole layers; one hand-over per rank boundary per token).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["PARALLELISMS", "DistributedError", "Group", "choose_parallelism", "detect", "offered"]

PARALLELISMS = ("auto", "tensor", "pipeline")

# environment variables each mlx.launch backend sets (mlx/_distributed_utils/launch.py)
_BACKENDS: tuple[tuple[str, str], ...] = (
    ("MLX_IBV_DEVICES", "jaccl"),
    ("MLX_JACCL_COORDINATOR", "jaccl"),
    ("MLX_HOSTFILE", "ring"),
    ("OMPI_COMM_WORLD_SIZE", "mpi"),
    ("PMI_SIZE", "mpi"),
    ("MLX_WORLD_SIZE", "nccl"),
)


class DistributedError(ValueError):
    """A distributed setup that cannot run (told to the user at startup)."""


@dataclass(frozen=True)
class Group:
    """This process's place in the group: ``rank`` of ``size``, over ``backend``."""

    rank: int
    size: int
    backend: str
    handle: Any  # the mx.distributed.Group

    @property
    def leader(self) -> bool:
        return self.rank == 0


def launched_backend(environ: dict[str, str] | None = None) -> str | None:
    """The mlx.launch backend this process was started by (from its environment), or None."""
    env = os.environ if environ is None else environ
    for name, backend in _BACKENDS:
        if env.get(name):
            return backend
    return None


def detect() -> Group | None:
    """The group this process belongs to, or None outside ``mlx.launch`` (or in a group of one)."""
    backend = launched_backend()
    if backend is None:
        return None
    import mlx.core as mx

    handle = mx.distributed.init(strict=False)
    if handle.size() <= 1:
        return None
    return Group(handle.rank(), handle.size(), backend, handle)


def offered(model: Any) -> tuple[str, ...]:
    """The parallelisms this (lazily loaded) mlx-lm model supports."""
    found = []
    if hasattr(model, "shard"):
        found.append("tensor")
    if hasattr(getattr(model, "model", None), "pipeline"):
        found.append("pipeline")
    return tuple(found)


def choose_parallelism(requested: str, available: tuple[str, ...], architecture: str) -> str:
    """``requested`` when the architecture offers it; ``auto`` prefers tensor, then pipeline."""
    if requested not in PARALLELISMS:
        raise DistributedError(f"--parallel takes {', '.join(PARALLELISMS)}, not {requested!r}")
    if not available:
        raise DistributedError(f"mlx-lm cannot shard the {architecture!r} architecture (no tensor or pipeline support)")
    if requested == "auto":
        return "tensor" if "tensor" in available else available[0]
    if requested not in available:
        raise DistributedError(
            f"mlx-lm offers no {requested} parallelism for the {architecture!r} architecture; "
            f"it offers: {', '.join(available)}"
        )
    return requested
