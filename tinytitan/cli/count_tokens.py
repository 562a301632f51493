"""``tinytitan count-tokens``: the prompt token count the server would report for a request."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["count_tokens"]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"tinytitan count-tokens: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def count_tokens(
    request: Annotated[
        str,
        typer.Argument(metavar="REQUEST.json", help="A Chat, Responses or Messages request body; '-' reads stdin."),
    ] = "-",
    api: str = typer.Option(
        None,
        "--api",
        metavar="chat|responses|messages",
        help="The request's protocol (default: detected from its fields).",
    ),
    model: str = typer.Option(
        None,
        "--model",
        envvar="TINYTITAN_MODEL",
        metavar="DIR_OR_ID",
        help="A local model directory or a hub id, as for serve.",
    ),
    stub: str = typer.Option(None, "--stub", metavar="SCRIPT.json", help="Count with a scripted backend."),
    max_context: int = typer.Option(None, "--max-context", help="Cap the context window (tokens)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"prompt_tokens", "api", "model"}.'),
) -> None:
    """Print the prompt tokens a request takes, exactly as the server reports usage.prompt_tokens."""
    import asyncio

    from tinytitan.api.offline import API_NAMES, detect_api, to_chat_request
    from tinytitan.cli.serve import build_backend
    from tinytitan.engine.backends.stub import ScriptError
    from tinytitan.engine.errors import TinyTitanError
    from tinytitan.engine.service import Engine
    from tinytitan.settings import Settings

    if api is not None and api not in API_NAMES:
        raise _fail(f"--api takes one of {', '.join(API_NAMES)}")
    try:
        text = sys.stdin.read() if request == "-" else Path(request).read_text(encoding="utf-8")
        doc = json.loads(text)
    except OSError as exc:
        raise _fail(f"cannot read {request}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _fail(f"{request} is not JSON: {exc}") from None
    try:
        backend = build_backend(Settings(model=model, stub=stub, max_context=max_context))
    except (ScriptError, OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    engine = Engine(backend, queue_limit=0)
    try:
        kind = api or detect_api(doc)
        chat = to_chat_request(doc, kind, model=engine.info.id)  # type: ignore[arg-type]
        tokens = asyncio.run(engine.count_tokens(chat))
    except TinyTitanError as exc:
        where = f" ({exc.param})" if exc.param else ""
        raise _fail(f"{exc.message}{where}") from None
    finally:
        engine.shutdown()
    if as_json:
        typer.echo(json.dumps({"prompt_tokens": tokens, "api": kind, "model": engine.info.id}))
    else:
        typer.echo(str(tokens))
