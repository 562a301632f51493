"""Building the backend and the Engine from ``Settings`` — what ``serve``, ``chat``, ``count-tokens``
and ``compact`` share, so every command runs the model exactly as the server does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinytitan.settings import Settings, SettingsError

if TYPE_CHECKING:
    from tinytitan.engine.backends.base import Backend
    from tinytitan.engine.distributed import Distributed
    from tinytitan.engine.service import Engine

__all__ = ["build_backend", "build_engine"]


def build_backend(settings: Settings, distributed: Distributed | None = None) -> Backend:
    """The scripted backend for ``--stub``, else the MLX engine (imported only then).

    ``distributed``: this process's place in an ``mlx.launch`` group (``serve`` only; issue #19).
    Raises ``ScriptError`` / ``SettingsError`` (both ``ValueError``) with a message for the user. On a
    Linux CPU call ``tinytitan.cpu_blas.ensure_openblas()`` first, before anything reads stdin.
    """
    if settings.stub:
        from tinytitan.engine.backends.stub import StubBackend, load_script

        return StubBackend(
            load_script(settings.stub), model_id=settings.model_id, context_override=settings.max_context
        )
    from tinytitan.engine.backends.mlx import MlxBackend  # heavy: only when serving a model
    from tinytitan.engine.backends.mlx.resolve import ModelUnavailable

    try:
        return MlxBackend(
            settings.model,
            model_id=settings.model_id,
            max_context=settings.max_context,
            prompt_cache_entries=settings.prompt_cache_entries,
            prompt_cache_mib=settings.prompt_cache_mib,
            dtype=settings.dtype,
            prompt_cache_dir=settings.prompt_cache_dir,
            prompt_cache_disk_mib=settings.prompt_cache_disk_mib,
            max_concurrent=settings.max_concurrent,
            distributed=distributed,
        )
    except ModelUnavailable as exc:
        raise SettingsError(exc.message) from None


def build_engine(settings: Settings, backend: Backend | None = None) -> Engine:
    """The Engine over ``backend`` (built from ``settings`` when not given), configured by ``settings``."""
    from tinytitan.engine.router import StripRules
    from tinytitan.engine.service import Engine

    memory = None
    if settings.memory:
        from tinytitan.engine.memory.decorator import MemoryConfig, MemoryDecorator

        memory = MemoryDecorator(MemoryConfig.from_settings(settings))
    return Engine(
        backend if backend is not None else build_backend(settings),
        queue_limit=settings.queue_limit,
        default_reasoning=settings.reasoning,
        strip=StripRules(always=settings.strip_cli_prompt, tags=settings.strip_tags),
        memory=memory,
    )
