"""The model manager: the ids a server serves, the backend behind each, and which one is resident.

    one model (--model)         one backend, built at startup, served as its id
    a catalog (--models-dir)    every catalog entry (plus <id>@cpu where the CPU is a second real
                                engine), each backend built on first need

A catalog backend is built from the entry's facts without weights: validation (context window,
sampling defaults, reasoning levels, tool-call family) and count_tokens for a model that is not
resident use its config and tokenizer and never load it. Exactly one model is resident: the
device worker (``tinytitan.engine.device``) loads it, and switches to another only once no row of
the resident one runs, in arrival order, logging each switch with its timings.

Every backend owns its prompt cache, so snapshots are keyed by model: a switch keeps the departing
model's snapshots (a switch back finds its prefixes warm); an explicit unload
(``POST /v1/models/unload``) releases them with the weights.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tinytitan.engine.device.worker import Switch
from tinytitan.engine.kv.form import KvForm
from tinytitan.engine.models.base import Backend
from tinytitan.engine.models.catalog import Catalog, CatalogEntry
from tinytitan.engine.request import ModelInfo

if TYPE_CHECKING:
    from tinytitan.engine.device.worker import DeviceWorker

__all__ = ["CPU_SUFFIX", "BackendFactory", "ModelManager", "Switch"]

CPU_SUFFIX = "@cpu"

BackendFactory = Callable[[CatalogEntry, str, "str | None"], Backend]  # (entry, served id, device)


@dataclass(slots=True)
class _Slot:
    info: ModelInfo
    build: Callable[[], Backend]
    entry: CatalogEntry | None = None
    device: str | None = None
    backend: Backend | None = None


class ModelManager:
    def __init__(self, slots: dict[str, _Slot], *, catalog: bool, preferred: str | None = None) -> None:
        if not slots:
            raise ValueError("a model manager needs at least one model")
        self._slots = slots
        self.catalog = catalog  # several installs, switched between (else one model)
        self._preferred = preferred if preferred in slots else None
        self._lock = threading.Lock()
        self.worker: DeviceWorker | None = None  # the engine's device worker, which makes models resident
        self.kv: KvForm | None = None  # the KV form asked for (--kv-bits): what a model not built yet will get
        self.on_build: Callable[[Backend], None] = lambda _backend: None  # told of each backend once built

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def single(cls, backend: Backend, entry: CatalogEntry | None = None) -> ModelManager:
        """One model, already built (its facts are the backend's)."""
        slot = _Slot(backend.info, lambda: backend, entry=entry, backend=backend)
        return cls({backend.info.id: slot}, catalog=False, preferred=backend.info.id)

    @classmethod
    def from_catalog(
        cls,
        catalog: Catalog,
        factory: BackendFactory,
        *,
        cpu_variants: bool = False,
        preferred: str | None = None,
    ) -> ModelManager:
        """A catalog: one lazily built backend per entry (and per ``@cpu`` variant)."""
        slots: dict[str, _Slot] = {}
        for entry in catalog.entries:
            variants: list[tuple[str, str | None]] = [(entry.id, None)]
            if cpu_variants:
                variants.append((entry.id + CPU_SUFFIX, "cpu"))
            for model_id, device in variants:
                if model_id in slots:
                    continue
                info = replace(entry.info, id=model_id)

                def build(e: CatalogEntry = entry, i: str = model_id, d: str | None = device) -> Backend:
                    return factory(e, i, d)

                slots[model_id] = _Slot(info, build, entry=entry, device=device)
        return cls(slots, catalog=True, preferred=preferred)

    # -- names and facts (never load weights) -------------------------------------------------------
    def ids(self) -> list[str]:
        """The served ids, in catalog order (``-fast`` aliases are not ids)."""
        return list(self._slots)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._slots

    @property
    def resident(self) -> str | None:
        """The id whose weights are loaded, if any."""
        if self.worker is None or self.worker.resident is None:
            return None
        resident = self.worker.resident
        slot = self._slots[resident]
        return resident if slot.backend is not None and slot.backend.loaded else None

    @property
    def preferred(self) -> str | None:
        """The model to load at startup: the one model, or the catalog id ``--model`` named."""
        return self._preferred

    @property
    def default_id(self) -> str:
        """The model a request-less caller means: the resident one, else the preferred, else the first."""
        return self.resident or self._preferred or next(iter(self._slots))

    def info(self, model_id: str) -> ModelInfo:
        """The model's facts: a catalog entry's (read once, at the scan), else its backend's own."""
        slot = self._slots[model_id]
        if slot.entry is None and slot.backend is not None:
            return slot.backend.info  # one model: as the backend says now (a stub script may change it)
        return slot.info

    def entry(self, model_id: str) -> CatalogEntry | None:
        return self._slots[model_id].entry

    def backend(self, model_id: str) -> Backend:
        """The backend serving ``model_id``, built on first need (facts and tokenizer; no weights)."""
        slot = self._slots[model_id]
        if slot.backend is None:
            with self._lock:
                if slot.backend is None:
                    built = slot.build()
                    self.on_build(built)
                    slot.backend = built
        return slot.backend

    def peek(self, model_id: str) -> Backend | None:
        """The backend serving ``model_id`` if it is built already (never builds one)."""
        return self._slots[model_id].backend

    def built(self) -> list[Backend]:
        return [s.backend for s in self._slots.values() if s.backend is not None]

    def details(self, model_id: str) -> dict[str, Any]:
        """Facts for ``GET /v1/models?details=true``, the same as ``tinytitan models`` shows locally:
        the catalog entry's, else those the one model's backend was read from (never loading weights)."""
        slot = self._slots[model_id]
        if slot.entry is not None:
            facts = slot.entry.as_json()
        else:
            info = self.info(model_id)
            facts = {
                "context_window": info.context_window,
                "reasoning_levels": list(info.reasoning_levels),
                "default_reasoning": info.default_reasoning,
                "tool_calls": info.tool_calls,
                "freeform_tools": info.freeform_grammars,
                "input_modalities": ["text", "image"] if info.vision else ["text"],
                **_described(slot.backend),
            }
        facts["id"] = model_id
        kv = slot.backend.kv if slot.backend is not None else self.kv
        facts["kv_cache"] = kv.as_json() if kv is not None else {"kv_bits": None}
        if slot.device is not None:
            facts["device"] = slot.device
        facts["resident"] = self.resident == model_id
        return facts

    @property
    def switches(self) -> list[Switch]:
        return self.worker.switches if self.worker is not None else []


def _described(backend: Backend | None) -> dict[str, Any]:
    """What a person compares (architecture, parameters, quantization, size, tool calls, where), for a
    model served without a catalog entry: read from the files the MLX backend was built from."""
    source = getattr(backend, "source", None)
    if source is None:  # the scripted backend: nothing on disk to describe
        return {}
    from tinytitan.engine.models.gguf.facts import gguf_facts
    from tinytitan.engine.models.mlx.facts import Facts, describe

    if source.gguf is not None:  # the GGUF file's own facts, as the catalog reads them
        about = gguf_facts(source.gguf, source.model_id)[1]
    else:
        b: Any = backend
        about = describe(Facts(source.path, b.config, b.template, b.syntax, b.info))
    return {
        "architecture": about.architecture,
        "parameters": about.parameters,
        "quantization": about.quantization,
        "size_bytes": about.size_bytes,
        "tool_call_family": about.tool_call_family,
        "format": "gguf" if source.gguf is not None else "mlx",
        "repo_id": source.repo_id,
        "origin": "hf" if source.repo_id else None,
        "path": str(source.gguf or source.path),
    }
