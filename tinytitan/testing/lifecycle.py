"""A backend that only records its lifecycle (load / unload) — for model manager and device worker tests."""

from __future__ import annotations

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.models.base import Backend, Prompt
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

    def open_batch(self) -> Batch:
        return _Empty()


class _Empty(Batch):
    """Every row ends at its first step, having said nothing."""

    max_rows = 1 << 30

    def __init__(self) -> None:
        self._rows: list[Row] = []

    @property
    def rows(self) -> int:
        return len(self._rows)

    def add(self, row: Row) -> list[Output]:
        self._rows.append(row)
        return []

    def remove(self, row: Row) -> None:
        self._rows.remove(row)

    def step(self) -> list[Output]:
        ended, self._rows = self._rows, []
        return [Output(row, finish="stop") for row in ended]
