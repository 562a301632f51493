"""``tinytitan chat``: talk to a model in the terminal, in-process, over the same engine path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from tinytitan.engine.request import Message
    from tinytitan.engine.service import Engine

__all__ = ["chat", "chat_turn"]


async def chat_turn(engine: Engine, history: list[Message], *, max_tokens: int | None) -> str:
    """Run one turn through the engine, printing reasoning (dim) and text as they arrive."""
    from tinytitan.engine.events import Finished, ReasoningDelta, TextDelta, ToolCall
    from tinytitan.engine.request import ChatRequest

    job = await engine.prepare(ChatRequest(model=engine.info.id, messages=tuple(history), max_tokens=max_tokens))
    text: list[str] = []
    thinking = False
    async for event in job.events():
        if isinstance(event, ReasoningDelta):
            thinking = True
            typer.secho(event.text, nl=False, dim=True)
        elif isinstance(event, TextDelta):
            if thinking:
                typer.echo("\n")
                thinking = False
            text.append(event.text)
            typer.echo(event.text, nl=False)
        elif isinstance(event, ToolCall):
            typer.secho(f"\n[tool call {event.name} {event.arguments}]", fg=typer.colors.YELLOW, nl=False)
        elif isinstance(event, Finished):
            u = event.usage
            typer.secho(
                f"\n[{event.reason}; {u.prompt_tokens} prompt ({u.cached_tokens} cached), "
                f"{u.completion_tokens} generated]",
                dim=True,
            )
    return "".join(text)


def chat(
    model: str = typer.Option(
        None,
        "--model",
        envvar="TINYTITAN_MODEL",
        metavar="DIR|FILE.gguf|ID",
        help="A model directory, a GGUF file or a hub id, as for serve.",
    ),
    stub: str = typer.Option(None, "--stub", metavar="SCRIPT.json", help="Chat with a scripted backend."),
    system: str = typer.Option(None, "--system", help="A system prompt."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Cap each answer (tokens)."),
    reasoning: str = typer.Option(None, "--reasoning", metavar="LEVEL", help="Reasoning level, as for serve."),
) -> None:
    """Chat with a model in the terminal (no server needed). Ctrl-D or /exit ends it."""
    import asyncio

    from tinytitan.cli.common import source_note
    from tinytitan.engine.backends.factory import build_backend
    from tinytitan.engine.errors import TinyTitanError
    from tinytitan.engine.reasoning import normalize_level
    from tinytitan.engine.request import Message
    from tinytitan.engine.service import Engine
    from tinytitan.settings import Settings

    try:
        backend = build_backend(Settings(model=model, stub=stub))
    except (OSError, ValueError) as exc:
        typer.secho(f"tinytitan chat: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from None
    engine = Engine(backend, queue_limit=0, default_reasoning=normalize_level(reasoning))
    history: list[Message] = [Message("system", system)] if system else []
    if note := source_note(backend):
        typer.secho(note, dim=True)
    typer.secho(f"chatting with {engine.info.id}; /exit or Ctrl-D to leave", dim=True)

    async def session() -> None:
        while True:
            try:
                line = await asyncio.to_thread(input, "> ")
            except EOFError:
                return
            if line.strip() in ("/exit", "/quit"):
                return
            if not line.strip():
                continue
            history.append(Message("user", line))
            try:
                answer = await chat_turn(engine, history, max_tokens=max_tokens)
            except TinyTitanError as exc:
                history.pop()
                typer.secho(f"error: {exc.message}", fg=typer.colors.RED)
                continue
            history.append(Message("assistant", answer))

    try:
        asyncio.run(session())
    finally:
        engine.shutdown()
