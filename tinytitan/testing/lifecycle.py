"""A backend that only records its lifecycle (load / unload) — for model manager and residency tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tinytitan.engine.backends.base import Backend, Piece, Prompt
from tinytitan.engine.request import ModelInfo, ValidatedRequest

__all__ = ["Recorder"]


class Recorder(Backend):
    """Appends ``load ID`` / ``unload ID[ keep]`` to the shared ``log``; ``fail_load`` fails the first load."""

    def __init__(self, model_id: str, log: list[str], *, context: int = 1000, fail_load: bool = False) -> None:
        self.model_id, self.log, self.context, self.fail_load = model_id, log, context, fail_load
        self._loaded = False

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(self.model_id, self.context)

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        if self.fail_load:
            self.fail_load = False
            raise RuntimeError("disk gone")
        self._loaded = True
        self.log.append(f"load {self.model_id}")

    def unload(self, *, keep_prompt_cache: bool = False) -> bool:
        was, self._loaded = self._loaded, False
        self.log.append(f"unload {self.model_id}{' keep' if keep_prompt_cache else ''}")
        return was

    def render(self, request: ValidatedRequest) -> Prompt:
        return Prompt("", 0)

    def generate(self, *args: Any) -> Iterator[Piece]:
        yield Piece("")
