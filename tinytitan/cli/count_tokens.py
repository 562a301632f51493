"""``tinytitan count-tokens``: the prompt token count the server would report for a request."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from tinytitan.cli.common import fail, fast_cpu, tool_notes_held
from tinytitan.cli.options import ModelFlags, with_model_flags
from tinytitan.jsonfile import read_json

__all__ = ["count_tokens"]


def _fail(message: str) -> typer.Exit:
    return fail("count-tokens", message)


@with_model_flags()
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
    flags: ModelFlags = ModelFlags(),
    as_json: bool = typer.Option(False, "--json", help='Print {"prompt_tokens", "api", "model"}.'),
) -> None:
    """Print the prompt tokens a request takes, exactly as a server started with the same flags reports
    usage.prompt_tokens. The request's own "model" is not checked: the count is for the model given here."""
    import asyncio

    from tinytitan.api.offline import detect_api, parse_api, to_chat_request
    from tinytitan.engine.build import build_engine
    from tinytitan.engine.errors import TinyTitanError

    fast_cpu(not flags.stub, "count-tokens")  # before stdin is read: a re-exec starts the process over
    try:
        settings = flags.settings(queue_limit=1)
        kind = parse_api(api) if api is not None else None
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if request == "-" and sys.stdin.isatty():  # not piped: say what it waits for
        typer.echo("reading the request from stdin (end it with Ctrl-D), or give REQUEST.json", err=True)
    doc = read_json(request, _fail, empty="pipe a request body in, or give REQUEST.json")
    try:
        with tool_notes_held() as notes:
            engine = build_engine(settings)
    except (OSError, ValueError) as exc:
        raise _fail(str(exc)) from None
    try:
        kind = kind or detect_api(doc)
        chat = to_chat_request(doc, kind, model=engine.info.id)
        tokens = asyncio.run(engine.count_tokens(chat))
        if chat.tools and notes:  # the count leaves the tools out, as the server would
            typer.echo(f"note: {notes[0]}", err=True)
    except TinyTitanError as exc:
        where = f" ({exc.param})" if exc.param else ""
        raise _fail(f"{exc.message}{where}") from None
    finally:
        engine.shutdown()
    if as_json:
        typer.echo(json.dumps({"prompt_tokens": tokens, "api": kind, "model": engine.info.id}))
    else:
        typer.echo(str(tokens))
