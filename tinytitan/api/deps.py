"""Dependencies the app injects into controllers (by name, as Litestar 3 will require)."""

from __future__ import annotations

from typing import TypeAlias

from litestar.di import NamedDependency

from tinytitan.api.responses.store import ResponseStore
from tinytitan.engine.service import Engine

__all__ = ["EngineDep", "StoreDep"]

EngineDep: TypeAlias = NamedDependency[Engine]
StoreDep: TypeAlias = NamedDependency[ResponseStore]
