"""The model families' tiny MLX backends, built on first use and shared within a test module."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.testing.device import on_device
from tinytitan.testing.families import family_dir


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, MlxBackend]]:
    made: dict[str, MlxBackend] = {}

    def get(name: str) -> MlxBackend:  # NAME, or NAME@text: its markers as plain text
        if name not in made:
            base, _, variant = name.partition("@")
            made[name] = MlxBackend(str(family_dir(base, text_markers=bool(variant))))
        return made[name]

    yield _Lazy(get)

    def unload_all() -> None:
        for backend in made.values():
            backend.unload()

    on_device(unload_all)  # unloading frees MLX memory: a device thread's work


class _Lazy(dict[str, MlxBackend]):
    def __init__(self, get: Callable[[str], MlxBackend]) -> None:
        super().__init__()
        self.get_backend = get

    def __missing__(self, name: str) -> MlxBackend:
        return self.get_backend(name)
