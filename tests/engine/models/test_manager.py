"""The model manager: served ids, lazy backends, one resident model, switches (issue 15)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tinytitan.engine.device.worker import DeviceWorker
from tinytitan.engine.models.base import Backend
from tinytitan.engine.models.catalog import Catalog, CatalogEntry
from tinytitan.engine.models.manager import ModelManager
from tinytitan.engine.models.mlx.facts import Description
from tinytitan.engine.request import ModelInfo
from tinytitan.testing.lifecycle import Recorder


def entry(model_id: str, context: int = 1000) -> CatalogEntry:
    return CatalogEntry(
        id=model_id,
        path=Path("/models") / model_id,
        format="mlx",
        origin="dir",
        info=ModelInfo(model_id, context),
        about=Description("qwen3", parameters=1, quantization="float32", size_bytes=1, tool_call_family=None),
    )


def device(models: ModelManager) -> DeviceWorker:
    """The device worker an Engine gives ``models`` (it alone loads and unloads)."""
    models.worker = DeviceWorker(models.backend, log_loads=models.catalog)
    return models.worker


def catalog_manager(events: list[str], **kw: Any) -> ModelManager:
    catalog = Catalog((entry("a"), entry("b", 500)))

    def build(e: CatalogEntry, model_id: str, device: str | None) -> Backend:
        events.append(f"build {model_id}")
        return Recorder(model_id, events)

    return ModelManager.from_catalog(catalog, build, **kw)


def test_facts_come_from_the_catalog_without_building_a_backend() -> None:
    events: list[str] = []
    models = catalog_manager(events)
    assert models.ids() == ["a", "b"] and models.catalog
    assert models.info("b").context_window == 500
    assert models.details("b")["path"] == "/models/b" and models.details("b")["resident"] is False
    assert models.resident is None and models.default_id == "a"
    assert events == []


def test_switching_unloads_the_resident_model_and_keeps_its_prompt_cache(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []
    models = catalog_manager(events)
    worker = device(models)
    with caplog.at_level(logging.INFO, logger="tinytitan.models"):
        worker.activate("a").result(10)
        worker.activate("a").result(10)  # already resident: nothing happens
        worker.activate("b").result(10)
        worker.activate("a").result(10)
    worker.close()
    assert events == ["build a", "load a", "build b", "unload a keep", "load b", "unload b keep", "load a"]
    assert [(s.previous, s.current) for s in models.switches] == [("a", "b"), ("b", "a")]
    switches = [r.getMessage() for r in caplog.records if "switched" in r.getMessage()]
    assert len(switches) == 2 and switches[0].startswith("switched model a -> b in ")
    assert models.resident == "a" and models.default_id == "a"
    assert models.details("a")["resident"] is True


def test_an_explicit_unload_releases_the_prompt_cache_too() -> None:
    events: list[str] = []
    models = catalog_manager(events)
    worker = device(models)
    assert worker.unload().result(10) is False
    worker.activate("b").result(10)
    assert worker.unload().result(10) is True and events[-1] == "unload b" and models.resident is None
    worker.activate("a").result(10)
    assert events[-1] == "load a" and not models.switches  # nothing was resident: a load, not a switch
    worker.close()


def test_cpu_variants_are_their_own_ids_on_the_cpu_device() -> None:
    built: list[tuple[str, str | None]] = []

    def factory(e: CatalogEntry, model_id: str, device: str | None) -> Backend:
        built.append((model_id, device))
        return Recorder(model_id, [])

    models = ModelManager.from_catalog(Catalog((entry("a"),)), factory, cpu_variants=True)
    assert models.ids() == ["a", "a@cpu"]
    assert models.info("a@cpu").id == "a@cpu" and models.details("a@cpu")["device"] == "cpu"
    worker = device(models)
    worker.activate("a@cpu").result(10)
    worker.close()
    assert built == [("a@cpu", "cpu")]


def test_one_model_is_resident_when_its_backend_is_loaded() -> None:
    events: list[str] = []
    backend = Recorder("m", events)
    models = ModelManager.single(backend)
    assert models.ids() == ["m"] and not models.catalog and models.resident is None
    worker = device(models)
    worker.activate("m").result(10)
    worker.close()
    assert models.resident == "m" and models.backend("m") is backend
    assert models.details("m") == {
        "id": "m",
        "context_window": 1000,
        "reasoning_levels": ["off", "on"],
        "default_reasoning": "on",
        "tool_calls": True,
        "freeform_tools": False,
        "input_modalities": ["text"],  # a text-only model
        "kv_cache": {"kv_bits": None},  # full precision (no --kv-bits)
        "resident": True,
    }
