"""``tinytitan serve``: flags → Settings → backend → Engine → app → uvicorn."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from tinytitan.cli.banner import ready_lines, say
from tinytitan.cli.common import fail, fast_cpu, tool_notes_held
from tinytitan.cli.early_answers import EarlyAnswers
from tinytitan.cli.loading_display import LoadingDisplay
from tinytitan.cli.options import (
    DraftModel,
    Drafts,
    Dtype,
    KvCache,
    Memory,
    MemoryDir,
    ModelFlags,
    ModelsDir,
    memory_dir,
    option,
    with_kv_flags,
    with_model_flags,
    with_sampling_flags,
)
from tinytitan.settings import DEFAULT_HOST, DEFAULT_PORT, Settings

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed import Distributed
    from tinytitan.engine.service import Engine

__all__ = ["serve"]


def _fail(message: str) -> typer.Exit:
    return fail("serve", message)


@with_model_flags()
@with_sampling_flags
@with_kv_flags
def serve(
    flags: ModelFlags = ModelFlags(),
    models_dir: ModelsDir = [],  # noqa: B006 - Typer reads the default, never mutates it
    host: Annotated[
        str,
        option("--host", "Address to bind. Anything but loopback requires --api-key.", "HOST"),
    ] = DEFAULT_HOST,
    port: Annotated[int, option("--port", "Port to listen on (1-65535).", "PORT", min=1, max=65535)] = DEFAULT_PORT,
    api_key: Annotated[
        str | None,
        option("--api-key", "Require this key (Bearer or x-api-key) on every route but /health and /ready.", "KEY"),
    ] = None,
    cors_origin: Annotated[
        list[str], option("--cors-origin", "Allow browser requests from this origin (repeatable).", "ORIGIN")
    ] = [],  # noqa: B006 - Typer reads the default, never mutates it
    queue_limit: Annotated[
        int, option("--queue-limit", "Requests that may wait beyond the running ones; more are refused (429/529).")
    ] = 4,
    max_concurrent: Annotated[
        int,
        option("--max-concurrent", "Generations decoded together in one batch (a model; a --stub runs one at a time)."),
    ] = 4,
    log_level: Annotated[str, option("--log-level", "debug, info, warning or error.")] = "info",
    prompt_cache_entries: Annotated[
        int, option("--prompt-cache-entries", "KV snapshots kept for prompt-prefix reuse.")
    ] = 4,
    prompt_cache_mib: Annotated[int, option("--prompt-cache-mib", "Memory bound of the prompt cache (MiB).")] = 2048,
    prompt_cache_dir: Annotated[
        str | None,
        option(
            "--prompt-cache-dir",
            "Also keep prompt-cache KV snapshots on disk here, so long prefixes stay warm across restarts.",
            "DIR",
        ),
    ] = None,
    prompt_cache_disk_mib: Annotated[
        int,
        option(
            "--prompt-cache-disk-mib", "Size cap of --prompt-cache-dir (MiB); least recently used snapshots go first."
        ),
    ] = 8192,
    strip_cli_prompt: Annotated[
        bool,
        option(
            "--strip-cli-prompt", "Apply the -fast strip (no tools, system prompts or reminder spans) to every request."
        ),
    ] = False,
    strip_tags: Annotated[
        str, option("--strip-tags", "Tags whose <tag>…</tag> spans the -fast strip cuts (comma-separated).", "TAG,TAG")
    ] = "system-reminder",
    keepalive: Annotated[
        float,
        option(
            "--keepalive",
            "Seconds between SSE keepalives while a stream waits for its next event (a long prefill, a queue).",
            "SECONDS",
        ),
    ] = 5.0,
    websockets: Annotated[
        bool,
        option(
            "--websockets/--no-websockets",
            "Serve Responses over WebSocket (GET /v1/responses with Upgrade); off answers 426 (clients use HTTP).",
        ),
    ] = True,
    websocket_max_age: Annotated[
        float,
        option(
            "--websocket-max-age",
            "Seconds a WebSocket connection may live; then websocket_connection_limit_reached (clients reconnect).",
            "SECONDS",
        ),
    ] = 3600.0,
    dtype: Dtype = "auto",
    parallel: Annotated[
        str,
        option(
            "--parallel",
            "Under mlx.launch: how the ranks split the model (auto: tensor when the architecture offers it).",
            "auto|tensor|pipeline",
        ),
    ] = "auto",
    distributed_timeout: Annotated[
        float,
        option(
            "--distributed-timeout",
            "Under mlx.launch: a rank silent this long (one step, or an idle heartbeat) stops the group.",
            "SECONDS",
        ),
    ] = 60.0,
    memory: Memory = False,
    memory_tools: Annotated[
        str,
        option(
            "--memory-tools",
            "Memory tools offered to the model (minimal: set, get, list; off: the recalled list only).",
            "off|minimal|full",
        ),
    ] = "full",
    memory_tool_rounds: Annotated[
        int,
        option(
            "--memory-tool-rounds", "Memory-only turns the server runs per request before a final answer without them."
        ),
    ] = 4,
    memory_directory: MemoryDir = None,
    memory_fsync: Annotated[bool, option("--memory-fsync", "Sync the memory journal on every write.")] = False,
    memory_max_records: Annotated[
        int, option("--memory-max-records", "Records kept per workspace; beyond it the least important go first.")
    ] = 5000,
    memory_max_mib: Annotated[int, option("--memory-max-mib", "Memory kept per workspace (MiB).")] = 32,
    max_images: Annotated[
        int, option("--max-images", "Images one request may send a vision model; more are refused (400).", min=0)
    ] = 20,
    max_image_mib: Annotated[
        float, option("--max-image-mib", "Largest image a request may send (MiB, as encoded).", "MIB", min=0.001)
    ] = 20.0,
    max_image_pixels: Annotated[
        int,
        option("--max-image-pixels", "Most pixels (width x height) an image may have; more is refused unread.", min=1),
    ] = 40_000_000,
    allow_image_urls: Annotated[
        bool,
        option(
            "--allow-image-urls",
            "Fetch http(s) image URLs that requests name (off: refused, so the server fetches nothing for a client).",
        ),
    ] = False,
    sampling: dict[str, float] | None = None,  # --temperature …: with_sampling_flags
    drafts: Drafts = True,
    draft_model: DraftModel = None,
    kv: KvCache = KvCache(),  # --kv-bits … --max-kv-memory: with_kv_flags
) -> None:
    """Serve a model (or a --stub script) over the OpenAI and Anthropic APIs."""
    try:
        settings = flags.settings(
            host=host,
            port=port,
            api_key=api_key,
            cors_origins=list(cors_origin),
            queue_limit=queue_limit,
            max_concurrent=max_concurrent,
            drafts=drafts,
            draft_model=draft_model,
            log_level=log_level.lower(),
            prompt_cache_entries=prompt_cache_entries,
            strip_cli_prompt=strip_cli_prompt,
            strip_tags=tuple(t.strip() for t in strip_tags.split(",") if t.strip()),
            prompt_cache_mib=prompt_cache_mib,
            prompt_cache_dir=prompt_cache_dir,
            prompt_cache_disk_mib=prompt_cache_disk_mib,
            dtype=dtype,
            parallel=parallel.lower(),
            distributed_timeout=distributed_timeout,
            keepalive_seconds=keepalive,
            websockets=websockets,
            websocket_max_age=websocket_max_age,
            memory=memory,
            memory_tools=memory_tools.lower(),
            memory_tool_rounds=memory_tool_rounds,
            memory_dir=memory_dir(memory_directory),
            memory_fsync=memory_fsync,
            memory_max_records=memory_max_records,
            memory_max_mib=memory_max_mib,
            launch_dir=os.getcwd(),
            models_dirs=tuple(str(d) for d in models_dir),
            sampling_defaults=sampling or {},
            max_images=max_images,
            max_image_mib=max_image_mib,
            max_image_pixels=max_image_pixels,
            allow_image_urls=allow_image_urls,
            **kv.settings(),
        )
        settings.check()
    except ValueError as exc:  # a bad reasoning level, a SettingsError
        raise _fail(str(exc)) from None
    run_server(settings)


def _given(**values: float | None) -> dict[str, float]:
    """The sampling flags given (the server-wide defaults)."""
    return {k: v for k, v in values.items() if v is not None}


def _plain_start(level: str) -> None:
    """At the default level, TinyTitan's own INFO records begin once the model is in: until then the
    loading display says what loading does, and start-up reads as plain lines, not log records
    (warnings still show; ``--log-level debug`` shows everything)."""
    if level == "info":
        logging.getLogger("tinytitan").setLevel(logging.WARNING)


def _noted(early: EarlyAnswers | None) -> Callable[[str], None]:
    return early.note if early is not None else lambda _line: None


def _join_group(settings: Settings) -> Distributed | None:
    """This process's place in an ``mlx.launch`` group, or None when serving alone."""
    from tinytitan.engine.device.distributed import Distributed, DistributedError, detect

    group = detect()
    if group is None:
        return None
    try:
        return Distributed(group, settings.parallel, settings.distributed_timeout)
    except DistributedError as exc:
        raise _fail(str(exc)) from None


def _follow(backend: Any, distributed: Distributed) -> NoReturn:
    """Ranks > 0: no HTTP; load this rank's shard and replay rank 0's steps until it stops."""
    logging.getLogger("tinytitan").setLevel(logging.NOTSET)  # its log from here on (see _plain_start)
    typer.echo(f"TinyTitan {distributed.describe()} (pid {os.getpid()}); following rank 0, no HTTP", err=True)
    try:
        code = backend.follow()
    except (OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    raise typer.Exit(code)


def _bind(settings: Settings) -> socket.socket:
    from tinytitan.api.listen import ListenError, listen

    try:
        return listen(settings.host, settings.port)
    except ListenError as exc:
        raise _fail(str(exc)) from None


def run_server(settings: Settings) -> None:
    """Bind, resolve the model (refusing one that cannot load), serve while it loads, banner when ready."""
    from tinytitan.engine.build import build_backend, build_engine
    from tinytitan.engine.readiness import listen

    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _plain_start(settings.log_level)
    fast_cpu(not settings.stub, "serve")  # may re-exec this process once, before mlx is imported
    distributed = None if settings.stub else _join_group(settings)
    if distributed is not None and (settings.models_dirs or settings.draft_model or settings.kv_bits):
        raise _fail(
            "a distributed group serves one --model, in lockstep; --models-dir, --draft-model and --kv-bits are "
            "for one machine"
        )
    if distributed is not None:  # the group decodes in lockstep, one request at a time, no drafts
        settings = dataclasses.replace(settings, max_concurrent=1, drafts=False)
    sock = _bind(settings) if distributed is None or distributed.rank == 0 else None
    display = LoadingDisplay()
    early = EarlyAnswers(sock) if sock is not None else None  # /health answers while a GGUF file converts
    backend = None
    try:
        # a GGUF conversion says what it does; the note that a model has no tools waits for the banner
        with tool_notes_held(), early or contextlib.nullcontext(), listen(display), listen(_noted(early)):
            if distributed is not None:
                backend = build_backend(settings, distributed)
                distributed.plan(getattr(backend, "config", {}))
            engine = build_engine(settings, backend)
            _ = engine.info
    except (OSError, ValueError) as exc:  # ScriptError, SettingsError and DistributedError are ValueErrors
        display.clear()
        raise _fail(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl-C while a GGUF file converts: nothing is half-written
        display.clear()
        raise typer.Exit(0) from None
    if distributed is not None and distributed.rank > 0:
        _follow(backend, distributed)
    assert sock is not None
    try:
        _serve(engine, settings, sock, display, distributed)
    except KeyboardInterrupt:  # Ctrl-C before uvicorn took the signal over (the web stack imports)
        display.clear()
        raise typer.Exit(0) from None
    finally:
        if distributed is not None:
            distributed.shutdown()  # the followers exit with rank 0


def _serve(
    engine: Engine, settings: Settings, sock: socket.socket, display: LoadingDisplay, distributed: Distributed | None
) -> None:
    from tinytitan.api.server import Server, quiet_uvicorn, serve
    from tinytitan.engine.readiness import Readiness, listen

    server = Server(engine, settings)
    quiet_uvicorn(settings.log_level)  # after uvicorn configured its loggers
    failed: list[str] = []

    def settled(readiness: Readiness) -> None:
        display.clear()
        logging.getLogger("tinytitan").setLevel(logging.NOTSET)  # the log from here on (see _plain_start)
        if server.should_exit:  # stopping already: no banner
            return
        if readiness.state == "failed":
            failed.append(readiness.error or f"'{engine.models.preferred}' could not be loaded")
            server.should_exit = True
            return
        for line in ready_lines(engine, settings, distributed):
            say(line)

    engine.readiness.on_change(settled)
    with listen(display):
        serve(server, sock)
    display.clear()
    if failed:
        raise _fail(failed[0])
    if not engine.join(timeout=1.0):  # Ctrl-C while weights load: a load cannot be interrupted, so
        sys.stderr.flush()  # leave without waiting for it (the thread may be inside MLX: no finalizing)
        os._exit(0)
