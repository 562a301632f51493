"""``tinytitan chat``: a terminal chat over a server's Responses API (``tinytitan.chat``)."""

from __future__ import annotations

import typer

__all__ = ["chat"]


def chat(
    url: str = typer.Option(
        None,
        "--url",
        metavar="URL",
        help="Talk to this server (default: the local one at 127.0.0.1:8096 if it answers, else load the model here).",
    ),
    model: str = typer.Option(
        None,
        "--model",
        metavar="DIR_OR_ID",
        help="Load this model in-process (a directory or hub id, as for serve); with --url, the served id to use.",
    ),
    stub: str = typer.Option(None, "--stub", metavar="SCRIPT.json", help="Chat with a scripted backend, in-process."),
    api_key: str = typer.Option(
        None, "--api-key", envvar="TINYTITAN_API_KEY", help="The server's API key (sent as a Bearer token)."
    ),
    system: str = typer.Option(None, "--system", help="A system prompt (/system changes it)."),
    reasoning: str = typer.Option(
        None, "--reasoning", metavar="LEVEL", help="Reasoning level (off, on, low, medium, high, …; /reasoning)."
    ),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Cap each answer (tokens)."),
    max_context: int = typer.Option(None, "--max-context", help="In-process: cap the context window (tokens)."),
    tools: bool = typer.Option(
        False, "--tools", help="Offer the model read_file and list_directory (asks before each run)."
    ),
) -> None:
    """Chat with a model in the terminal. Piped stdin: one message per line, answers only."""
    from tinytitan.chat.app import ChatOptions, run_chat
    from tinytitan.engine.reasoning import normalize_level

    level = normalize_level(reasoning) if reasoning is not None else None
    if reasoning is not None and level is None:
        typer.secho(f"tinytitan chat: unknown reasoning level '{reasoning}'", err=True, fg=typer.colors.RED)
        raise typer.Exit(2)
    options = ChatOptions(
        url=url,
        model=model,
        stub=stub,
        api_key=api_key,
        system=system,
        reasoning=level,
        max_tokens=max_tokens,
        max_context=max_context,
        tools=tools,
    )
    raise typer.Exit(run_chat(options))
