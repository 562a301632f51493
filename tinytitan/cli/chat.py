"""``tinytitan chat``: a terminal chat over a server's Responses API (``tinytitan.chat``)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from tinytitan.cli.common import fail, fast_cpu
from tinytitan.cli.loading_display import shown_on_a_terminal
from tinytitan.cli.options import (
    MaxContext,
    Memory,
    MemoryDir,
    ModelFlags,
    Reasoning,
    Stub,
    Thinking,
    memory_dir,
    option,
    server_model,
    server_url,
)

__all__ = ["chat"]


def chat(
    prompt: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PROMPT",
            help="Answer this one message and exit (piped stdin is added after it); without it, chat.",
            show_default=False,
        ),
    ] = None,
    url: str = server_url("Talk to", "load the model here"),
    model: str = server_model("Load this model in-process", "the served id"),
    stub: Stub = None,
    max_context: MaxContext = None,
    reasoning: Reasoning = None,
    thinking: Thinking = None,
    api_key: Annotated[str | None, option("--api-key", "The server's API key (sent as a Bearer token).", "KEY")] = None,
    system: str = typer.Option(None, "--system", help="A system prompt (/system changes it)."),
    max_tokens: int = typer.Option(
        None, "--max-tokens", help="Cap each answer (tokens; default 2048, 0: up to the context window)."
    ),
    tools: bool = typer.Option(
        False, "--tools", help="Offer the model read_file and list_directory (asks before each run)."
    ),
    image: list[str] = typer.Option(
        [],
        "--image",
        metavar="PATH",
        help="Attach this picture (PNG, JPEG, GIF, WebP) to the prompt, or the first message; repeatable.",
    ),
    memory: Memory = False,
    memory_directory: MemoryDir = None,
) -> None:
    """Ask once (tinytitan chat "What is 2+2?"), or chat with a model in the terminal. Piped stdin: one message
    per line, answers only."""
    from tinytitan.chat.app import ChatOptions, run_chat

    # a model loaded here runs as `serve` would run it with these flags (with --url, --model is the served id)
    flags = ModelFlags(
        model=None if url else model, stub=stub, max_context=max_context, reasoning=reasoning, thinking=thinking
    )
    if max_tokens is not None and max_tokens < 0:
        raise fail("chat", f"--max-tokens takes a number of tokens (0: no cap), not {max_tokens}")
    try:
        server = flags.settings(memory=memory, memory_dir=memory_dir(memory_directory), launch_dir=os.getcwd())
    except ValueError as exc:
        raise fail("chat", str(exc)) from None
    options = ChatOptions(
        server,
        url=url,
        model=model,
        api_key=api_key,
        system=system,
        max_tokens=max_tokens,
        tools=tools,
        before_model=lambda: fast_cpu(True, "chat"),  # before stdin is read: a re-exec starts the process over
        loading=shown_on_a_terminal,
        prompt=" ".join(prompt) if prompt else None,
        images=list(image),
    )
    raise typer.Exit(run_chat(options))
