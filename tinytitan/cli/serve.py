"""``tinytitan serve``: flags → Settings → backend → Engine → app → uvicorn."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import typer

from tinytitan.settings import DEFAULT_HOST, DEFAULT_PORT, Settings, SettingsError

if TYPE_CHECKING:
    from tinytitan.engine.backends.base import Backend

__all__ = ["build_backend", "serve"]


def build_backend(settings: Settings) -> Backend:
    """The scripted backend for ``--stub``, else the MLX engine (imported only then).

    Raises ``ScriptError`` / ``SettingsError`` (both ``ValueError``) with a message for the user.
    """
    if settings.stub:
        from tinytitan.engine.backends.stub import StubBackend, load_script

        return StubBackend(
            load_script(settings.stub), model_id=settings.model_id, context_override=settings.max_context
        )
    from tinytitan.cpu_blas import ensure_openblas

    ensure_openblas()  # may re-exec this process once, before mlx is imported
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
        )
    except ModelUnavailable as exc:
        raise SettingsError(exc.message) from None


def _fail(message: str) -> typer.Exit:
    typer.secho(f"tinytitan: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def serve(
    model: str = typer.Option(
        None,
        "--model",
        envvar="TINYTITAN_MODEL",
        metavar="DIR_OR_ID",
        help="A local model directory or a Hugging Face hub id (org/name).",
    ),
    model_id: str = typer.Option(
        None,
        "--model-id",
        envvar="TINYTITAN_MODEL_ID",
        help="The id clients use (default: the directory or repo name).",
    ),
    host: str = typer.Option(
        DEFAULT_HOST,
        "--host",
        envvar="TINYTITAN_HOST",
        help="Address to bind. Anything but loopback requires --api-key.",
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", envvar="TINYTITAN_PORT", help="Port to listen on."),
    api_key: str = typer.Option(
        None,
        "--api-key",
        envvar="TINYTITAN_API_KEY",
        help="Require this key (Bearer or x-api-key) on every route but /health.",
    ),
    cors_origin: list[str] = typer.Option(
        [],
        "--cors-origin",
        envvar="TINYTITAN_CORS_ORIGIN",
        help="Allow browser requests from this origin (repeatable).",
    ),
    queue_limit: int = typer.Option(
        4,
        "--queue-limit",
        envvar="TINYTITAN_QUEUE_LIMIT",
        help="Requests that may wait beyond the running one; more are refused (429/529).",
    ),
    max_context: int = typer.Option(
        None, "--max-context", envvar="TINYTITAN_MAX_CONTEXT", help="Cap the context window (tokens)."
    ),
    reasoning: str = typer.Option(
        None,
        "--reasoning",
        envvar="TINYTITAN_REASONING",
        metavar="LEVEL",
        help="Default reasoning level: off, on, minimal, low, medium, high, xhigh, max.",
    ),
    thinking: str = typer.Option(
        None, "--thinking", envvar="TINYTITAN_THINKING", metavar="on|off", help="Shorthand for --reasoning on / off."
    ),
    stub: str = typer.Option(
        None,
        "--stub",
        envvar="TINYTITAN_STUB",
        metavar="SCRIPT.json",
        help="Serve a scripted backend instead of a model (tests, client wiring).",
    ),
    log_level: str = typer.Option(
        "info", "--log-level", envvar="TINYTITAN_LOG_LEVEL", help="debug, info, warning or error."
    ),
    prompt_cache_entries: int = typer.Option(
        4,
        "--prompt-cache-entries",
        envvar="TINYTITAN_PROMPT_CACHE_ENTRIES",
        help="KV snapshots kept for prompt-prefix reuse.",
    ),
    prompt_cache_mib: int = typer.Option(
        2048, "--prompt-cache-mib", envvar="TINYTITAN_PROMPT_CACHE_MIB", help="Memory bound of the prompt cache (MiB)."
    ),
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        envvar="TINYTITAN_DTYPE",
        help="Compute dtype: auto (fastest measured), float32, bfloat16, float16, native.",
    ),
) -> None:
    """Serve a model (or a --stub script) over the OpenAI and Anthropic APIs."""
    from tinytitan.engine.reasoning import normalize_level

    if thinking is not None and reasoning is not None:
        raise _fail("give --reasoning or --thinking, not both")
    if thinking is not None and thinking.lower() not in ("on", "off"):
        raise _fail("--thinking takes on or off")
    level_word = reasoning if reasoning is not None else thinking
    level = normalize_level(level_word) if level_word is not None else None
    if level_word is not None and level is None:
        raise _fail(f"unknown reasoning level '{level_word}'")
    settings = Settings(
        model=model,
        model_id=model_id,
        host=host,
        port=port,
        api_key=api_key,
        cors_origins=list(cors_origin),
        queue_limit=queue_limit,
        max_context=max_context,
        reasoning=level,
        stub=stub,
        log_level=log_level.lower(),
        prompt_cache_entries=prompt_cache_entries,
        prompt_cache_mib=prompt_cache_mib,
        dtype=dtype,
    )
    try:
        settings.check()
    except SettingsError as exc:
        raise _fail(str(exc)) from None
    run_server(settings)


def _engine_note(settings: Settings) -> str:
    if settings.stub:
        return "scripted"
    from tinytitan.cpu_blas import openblas_active

    blas = "OpenBLAS preloaded" if openblas_active() else "bundled BLAS"
    return f"mlx, dtype {settings.dtype}, {blas}"


def run_server(settings: Settings) -> None:
    import uvicorn

    from tinytitan.api.app import create_app
    from tinytitan.api.transport import uvicorn_options
    from tinytitan.engine.backends.stub import ScriptError
    from tinytitan.engine.service import Engine

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        backend = build_backend(settings)
        info = backend.info
    except (ScriptError, OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    engine = Engine(backend, queue_limit=settings.queue_limit, default_reasoning=settings.reasoning)
    shown_host = f"[{settings.host}]" if ":" in settings.host else settings.host
    typer.echo(
        f"TinyTitan serving '{info.id}' at http://{shown_host}:{settings.port}/v1 "
        f"(context {info.context_window} tokens, {_engine_note(settings)})",
        err=True,
    )
    uvicorn.run(
        create_app(engine, settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=5,
        **uvicorn_options(settings),
    )
