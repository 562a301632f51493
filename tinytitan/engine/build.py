"""Building the backend and the Engine from ``Settings`` — what ``serve``, ``chat``, ``count-tokens``
and ``compact`` share, so every command runs the model exactly as the server does."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tinytitan.settings import Settings, SettingsError

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed import Distributed
    from tinytitan.engine.kv.budget import KvBudget
    from tinytitan.engine.memory.decorator import MemoryDecorator
    from tinytitan.engine.models.base import Backend
    from tinytitan.engine.models.catalog import Catalog, CatalogEntry
    from tinytitan.engine.models.manager import ModelManager
    from tinytitan.engine.request.image_check import ImageLimits
    from tinytitan.engine.service import Engine

__all__ = ["build_backend", "build_catalog", "build_engine"]

log = logging.getLogger("tinytitan.catalog")


def build_backend(settings: Settings, distributed: Distributed | None = None) -> Backend:
    """The scripted backend for ``--stub``, else the MLX engine (imported only then).

    ``distributed``: this process's place in an ``mlx.launch`` group (``serve`` only; issue #19).
    Raises ``ScriptError`` / ``SettingsError`` (both ``ValueError``) with a message for the user. On a
    Linux CPU call ``tinytitan.cpu_blas.ensure_openblas()`` first, before anything reads stdin.
    """
    if settings.stub:
        from tinytitan.engine.models.stub import StubBackend, load_script

        return StubBackend(
            load_script(settings.stub), model_id=settings.model_id, context_override=settings.max_context
        )
    from tinytitan.engine.models.files import ModelUnavailable

    try:
        draft = {"draft_model": settings.draft_model} if settings.draft_model else {}
        return _mlx_backend(settings, settings.model, settings.model_id, distributed=distributed, **draft)
    except ModelUnavailable as exc:
        raise SettingsError(exc.message) from None


def _mlx_backend(settings: Settings, model: str | None, model_id: str | None, **where: Any) -> Backend:
    """The MLX engine for ``model`` configured by ``settings`` (``where``: its device or its group)."""
    from tinytitan.engine.models.mlx import MlxBackend  # heavy: only when serving a model

    return MlxBackend(
        model,
        model_id=model_id,
        max_context=settings.max_context,
        prompt_cache_entries=settings.prompt_cache_entries,
        prompt_cache_mib=settings.prompt_cache_mib,
        dtype=settings.dtype,
        prompt_cache_dir=settings.prompt_cache_dir,
        prompt_cache_disk_mib=settings.prompt_cache_disk_mib,
        max_concurrent=settings.max_concurrent,
        drafts=settings.drafts,
        kv=settings.kv_form(),
        **where,
    )


def _catalog_backend(settings: Settings, entry: CatalogEntry, model_id: str, device: str | None) -> Backend:
    """Built on a catalog model's first request: its files may have gone since the scan (a 503)."""
    from tinytitan.engine.errors import ModelLoadFailed
    from tinytitan.engine.models.files import ModelUnavailable

    try:
        return _mlx_backend(settings, str(entry.path), model_id, device=device)
    except ModelUnavailable as exc:
        raise ModelLoadFailed(f"model '{model_id}' could not be loaded: {exc.message}") from None


def build_catalog(settings: Settings) -> ModelManager:
    """The catalog ``--models-dir`` names (scanned now, nothing loaded), ``<id>@cpu`` where the CPU is a
    second real engine; ``SettingsError`` when it holds no loadable model or ``--model`` names none of it."""
    from functools import partial

    from tinytitan.engine.device.placement import DTYPES, has_accelerator
    from tinytitan.engine.models.catalog import scan
    from tinytitan.engine.models.manager import ModelManager

    if settings.dtype not in DTYPES:
        raise SettingsError(f"unknown dtype {settings.dtype!r}; choose from {', '.join(DTYPES)}")
    catalog = scan(settings.models_dirs, max_context=settings.max_context, quiet=True)
    where = " and ".join("the Hugging Face cache" if d == "hf" else d for d in settings.models_dirs)
    if not catalog.entries:
        raise SettingsError(f"no loadable model in {where}: {_why_none(catalog)}")
    for skipped in catalog.skipped:  # served without them: the log says why
        log.warning("catalog: skipping %s: %s", skipped.path, skipped.reason)
    models = ModelManager.from_catalog(
        catalog, partial(_catalog_backend, settings), cpu_variants=has_accelerator(), preferred=settings.model
    )
    models.kv = settings.kv_form()
    if settings.model is not None and settings.model not in models:
        raise SettingsError(f"--model {settings.model} is not in the catalog; it serves {', '.join(models.ids())}")
    return models


def _memory(settings: Settings) -> MemoryDecorator:
    """The memory decorator ``--memory`` asks for, configured by ``settings``."""
    from tinytitan.engine.memory.decorator import MemoryConfig, MemoryDecorator
    from tinytitan.engine.memory.store import Retention

    if not settings.memory_dir or not settings.launch_dir:
        raise SettingsError("memory needs memory_dir and launch_dir (the CLI fills both)")
    config = MemoryConfig(
        directory=settings.memory_dir,
        launch_dir=settings.launch_dir,
        tools=settings.memory_tools,
        rounds=settings.memory_tool_rounds,
        fsync=settings.memory_fsync,
        retention=Retention(settings.memory_max_records, settings.memory_max_mib * 1024 * 1024),
    )
    return MemoryDecorator(config)


def _why_none(catalog: Catalog) -> str:
    """What a catalog with no entry found instead, in one line."""
    pull = "`tinytitan models pull ORG/NAME` downloads one into the Hugging Face cache (--models-dir hf)"
    if not catalog.skipped:
        return f"it holds no model directories (with a config.json) and no .gguf files; {pull}"
    shown = "; ".join(f"{s.path.name}: {s.reason}" for s in catalog.skipped[:3])
    more = f"; and {len(catalog.skipped) - 3} more" if len(catalog.skipped) > 3 else ""
    return f"{len(catalog.skipped)} skipped ({shown}{more}); {pull}"


def build_engine(settings: Settings, backend: Backend | ModelManager | None = None) -> Engine:
    """The Engine over ``backend`` (built from ``settings`` when not given: the catalog of
    ``--models-dir``, else one model), configured by ``settings``."""
    from tinytitan.engine.request.router import StripRules
    from tinytitan.engine.service import Engine

    memory = None
    if settings.memory:
        memory = _memory(settings)
    if backend is None:
        backend = build_catalog(settings) if settings.models_dirs else build_backend(settings)
    from tinytitan.engine.models.manager import ModelManager

    catalog = isinstance(backend, ModelManager)  # a one-model backend says its own batch size
    return Engine(
        backend,
        queue_limit=settings.queue_limit,
        max_concurrent=settings.max_concurrent if catalog else None,
        default_reasoning=settings.reasoning,
        strip=StripRules(always=settings.strip_cli_prompt, tags=settings.strip_tags),
        memory=memory,
        sampling_defaults=settings.sampling_defaults,
        kv_budget=kv_budget(settings, backend),
        images=image_limits(settings),
    )


def image_limits(settings: Settings) -> ImageLimits:
    """What a request's images may be, from serve's ``--max-images`` … ``--allow-image-urls``."""
    from tinytitan.engine.request.image_check import ImageLimits

    return ImageLimits(
        max_images=settings.max_images,
        max_bytes=int(settings.max_image_mib * 1024 * 1024),
        max_pixels=settings.max_image_pixels,
        fetch_urls=settings.allow_image_urls,
    )


def kv_budget(settings: Settings, models: Backend | ModelManager) -> KvBudget | None:
    """The KV memory budget ``--max-kv-memory`` sets (None: off), by default half of what the machine
    has free now once the largest model's weights are in; none for a scripted backend unless asked."""
    from tinytitan.engine.kv.budget import KvBudget, default_limit

    if settings.max_kv_memory == 0:
        return None
    if settings.max_kv_memory is not None:
        return KvBudget(settings.max_kv_memory)
    if settings.stub:
        return None
    chosen = default_limit(_weights(models))
    if chosen is None:
        log.info("this system does not say how much memory is free: no KV memory budget (--max-kv-memory sets one)")
        return None
    return KvBudget(*chosen)


def _weights(models: Backend | ModelManager) -> int:
    """Bytes of the largest served model's weight files (0 when unknown)."""
    from tinytitan.engine.models.manager import ModelManager

    if isinstance(models, ModelManager):
        sizes = [(e.about.size_bytes or 0) for e in (models.entry(i) for i in models.ids()) if e is not None]
        built = [_files_size(b) for b in models.built()]
        return max([*sizes, *built, 0])
    return _files_size(models)


def _files_size(backend: Backend) -> int:
    """Bytes of the MLX model directory ``backend`` loads (0 for a scripted one)."""
    path = getattr(getattr(backend, "source", None), "path", None)
    if path is None:
        return 0
    from tinytitan.engine.models.mlx.facts import size_on_disk

    return size_on_disk(path)
