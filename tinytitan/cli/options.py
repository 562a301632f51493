"""The options every model-running command shares (serve, chat, count-tokens, compact).

Declared once, so the offline commands take exactly the knobs that change what the server would
do — the model, the served id, the context cap, the default reasoning level — and read the same
``TINYTITAN_*`` variables.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from tinytitan.settings import Settings

__all__ = [
    "Dtype",
    "MaxContext",
    "Memory",
    "MemoryDir",
    "Model",
    "ModelId",
    "ModelsDir",
    "Reasoning",
    "Stub",
    "Thinking",
    "engine_settings",
    "memory_dir",
    "reasoning_level",
]

Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        envvar="TINYTITAN_MODEL",
        metavar="DIR|FILE.gguf|ID",
        help="A local model directory, a GGUF file or a Hugging Face hub id (org/name).",
    ),
]
ModelId = Annotated[
    str | None,
    typer.Option(
        "--model-id", envvar="TINYTITAN_MODEL_ID", help="The id clients use (default: the directory or repo name)."
    ),
]
ModelsDir = Annotated[
    list[Path],
    typer.Option(
        "--models-dir",
        envvar="TINYTITAN_MODELS_DIR",
        metavar="DIR|hf",
        help="Serve a catalog: every model directory in DIR, or 'hf' for the Hugging Face cache "
        "(repeatable; several in the variable are separated by ':').",
    ),
]
Stub = Annotated[
    str | None,
    typer.Option(
        "--stub",
        envvar="TINYTITAN_STUB",
        metavar="SCRIPT.json",
        help="A scripted backend instead of a model (tests, client wiring).",
    ),
]
MaxContext = Annotated[
    int | None,
    typer.Option("--max-context", envvar="TINYTITAN_MAX_CONTEXT", help="Cap the context window (tokens)."),
]
Reasoning = Annotated[
    str | None,
    typer.Option(
        "--reasoning",
        envvar="TINYTITAN_REASONING",
        metavar="LEVEL",
        help="Default reasoning level: off, on, minimal, low, medium, high, xhigh, max.",
    ),
]
Thinking = Annotated[
    str | None,
    typer.Option(
        "--thinking", envvar="TINYTITAN_THINKING", metavar="on|off", help="Shorthand for --reasoning on / off."
    ),
]
Dtype = Annotated[
    str,
    typer.Option(
        "--dtype",
        envvar="TINYTITAN_DTYPE",
        help="Compute dtype: auto (fastest measured), float32, bfloat16, float16, native.",
    ),
]


Memory = Annotated[
    bool,
    typer.Option(
        "--memory/--no-memory",
        envvar="TINYTITAN_MEMORY",
        help="Agent memory: memory_* tools the server runs itself, one journal per workspace.",
    ),
]
MemoryDir = Annotated[
    str | None,
    typer.Option(
        "--memory-dir",
        envvar="TINYTITAN_MEMORY_DIR",
        metavar="DIR",
        help="Where the memory journals live (default: tinytitan/memory in the user's data directory).",
    ),
]


def memory_dir(value: str | None) -> str:
    """``--memory-dir`` as an absolute path, or the default under the user's data directory."""
    from tinytitan.settings import default_memory_dir

    return os.path.abspath(os.path.expanduser(value or default_memory_dir()))


def reasoning_level(reasoning: str | None, thinking: str | None) -> str | None:
    """The ladder level ``--reasoning`` / ``--thinking`` ask for; ``ValueError`` with a message otherwise."""
    from tinytitan.engine.reasoning import normalize_level

    if thinking is not None and reasoning is not None:
        raise ValueError("give --reasoning or --thinking, not both")
    if thinking is not None and thinking.lower() not in ("on", "off"):
        raise ValueError("--thinking takes on or off")
    word = reasoning if reasoning is not None else thinking
    level = normalize_level(word) if word is not None else None
    if word is not None and level is None:
        raise ValueError(f"unknown reasoning level '{word}'")
    return level


def engine_settings(
    model: str | None,
    model_id: str | None,
    stub: str | None,
    max_context: int | None,
    reasoning: str | None = None,
    thinking: str | None = None,
) -> Settings:
    """The ``Settings`` an offline command runs the model with: the same as ``serve`` given these flags."""
    return Settings(
        model=model,
        model_id=model_id,
        stub=stub,
        max_context=max_context,
        reasoning=reasoning_level(reasoning, thinking),
        queue_limit=1,
    )
