"""What ``tinytitan serve`` says once the model is in: the banner line, then one line per fact a
person needs before pointing a client at it — why this model (the embedded fallback), memory, no
tool calls, the sampling defaults — each ``Label: …``, never a log line."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tinytitan.settings import Settings

if TYPE_CHECKING:
    from tinytitan.engine.device.distributed import Distributed
    from tinytitan.engine.request import ModelInfo
    from tinytitan.engine.service import Engine

__all__ = ["banner", "engine_note", "kv_budget_note", "memory_note", "no_tools_note", "ready_lines", "say"]


def say(line: str) -> None:
    """One line on stderr; on a terminal wrapped between words (never mid-word) to its width."""
    if sys.stderr.isatty():
        width = max(40, shutil.get_terminal_size().columns - 1)
        line = textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    typer.echo(line, err=True)


def engine_note(settings: Settings, backend: object = None) -> str:
    if settings.stub:
        return "scripted"
    from tinytitan.cpu_blas import blas_state

    blas = blas_state().describe()
    disk = f", prompt cache on disk at {settings.prompt_cache_dir}" if settings.prompt_cache_dir else ""
    on = settings.drafts and getattr(backend, "drafts", True)  # the backend's: off where mlx-lm lacks what they need
    drafts = ", prompt-lookup drafts" if on else ""
    if on and settings.draft_model:
        drafts += f" and {Path(settings.draft_model.rstrip('/')).name}'s"  # a path's or hub id's last part
    kv = getattr(backend, "kv", settings.kv_form())  # a built model's own: full where its heads do not fit
    kv_note = f", {kv.describe()}" if kv is not None else ""
    return f"mlx, dtype {settings.dtype}, {blas}, up to {settings.max_concurrent} at once{drafts}{kv_note}{disk}"


def kv_budget_note(engine: Engine) -> str:
    from tinytitan.engine.kv.budget import size_text

    budget = engine.kv_budget
    assert budget is not None
    return (
        f"KV memory budget: {size_text(budget.limit)} ({budget.source}) for the running requests and the prompt "
        "cache together; a request that would pass it waits, one that never fits is refused"
    )


def memory_note(settings: Settings, info: ModelInfo | None) -> str:
    from tinytitan.engine.memory.scope import refused_reason

    if info is not None and not info.tool_calls:
        return (
            f"Memory on, but '{info.id}' has no tool-call syntax: its prompts get no memory block and no tools "
            f"(journals in {settings.memory_dir})"
        )
    note = f"Memory on: tools {settings.memory_tools}, journals in {settings.memory_dir}"
    if settings.memory_fsync:
        note += ", synced on every write"
    reason = refused_reason(settings.launch_dir or "/", os.path.expanduser("~"))
    if reason is not None:
        note += (
            f"; launched from {reason}, so a request that declares no workspace "
            "(X-TinyTitan-Workspace, or a working directory in its prompt) gets no memory"
        )
    return note


def no_tools_note(model_id: str) -> str:
    return (
        f"Tools: none; '{model_id}' has no tool-call syntax TinyTitan can read, so requests' tools are not "
        "shown to it (an agent still gets answers, without tool calls)"
    )


def banner(engine: Engine, settings: Settings) -> str:
    """The one line that says the server is ready: what it serves, where, on what."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    where = f"at http://{host}:{settings.port}/v1"
    if not engine.models.catalog:
        images = ", takes images" if engine.info.vision else ""
        facts = f"context {engine.info.context_window} tokens{images}, {engine_note(settings, engine.backend)}"
        return f"TinyTitan serving '{engine.info.id}' {where} ({facts})"
    ids = engine.model_ids()
    shown = ", ".join(ids[:6]) + (f", … ({len(ids)} in all)" if len(ids) > 6 else "")
    first = engine.models.preferred
    facts = f"{first} loaded" if first else "each loaded on its first request"
    facts += f", {engine_note(settings, engine.models.peek(engine.models.default_id))}"  # never builds one
    return f"TinyTitan serving a catalog of {len(ids)} models ({shown}) {where} ({facts})"


def ready_lines(engine: Engine, settings: Settings, distributed: Distributed | None) -> list[str]:
    """The banner and the lines under it, in order."""
    from tinytitan.engine.request.defaults import describe_defaults

    lines = [banner(engine, settings)]
    if distributed is not None:
        lines.append(f"TinyTitan {distributed.describe()}")
    if not engine.models.catalog and (note := engine.backend.note):  # why this model (the embedded one)
        lines.append(f"Model: {note}")
    if settings.memory:
        lines.append(memory_note(settings, None if engine.models.catalog else engine.info))
    elif not engine.models.catalog and engine.info.tool_calls is False:
        lines.append(no_tools_note(engine.info.id))
    if not engine.models.catalog:
        lines.append(f"Sampling defaults: {describe_defaults(engine.info)}; a request's own values win")
    elif settings.sampling_defaults:
        flags = ", ".join(f"{k} {v:g}" for k, v in settings.sampling_defaults.items())
        lines.append(f"Sampling defaults of every model: {flags} (serve flags); the rest are each model's")
    if engine.kv_budget is not None:
        lines.append(kv_budget_note(engine))
    return lines
