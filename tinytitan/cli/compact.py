"""``tinytitan compact SESSION.json``: compact a saved session offline, with the server's own code.

The session may be a Responses ``input`` array (or an object with ``input``), a Chat ``messages``
array (or an object with ``messages``), or an Anthropic Messages request. It is mapped by its
protocol's own mapper (guidance, tools, messages) and handed to
``tinytitan.engine.passes.compaction.compact`` — the same function behind ``POST /v1/responses/compact``
— over a backend built exactly as ``serve`` builds it. A fresh process has no warm prompt cache: the
whole session is prefilled once (the pass reads it as a continuation all the same).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tinytitan.cli.common import fail, fast_cpu, tool_notes_held
from tinytitan.cli.options import ModelFlags, with_model_flags

if TYPE_CHECKING:
    from tinytitan.engine.errors import TinyTitanError
    from tinytitan.engine.request import ChatRequest

__all__ = ["SessionError", "compact", "load_session"]


class SessionError(ValueError):
    """A session file that cannot be compacted; the message says why."""


def _fail(message: str) -> typer.Exit:
    return fail("compact", message)


def _named(exc: TinyTitanError) -> str:
    return f"{exc.message} (at {exc.param})" if exc.param else exc.message


def load_session(doc: Any) -> tuple[ChatRequest, str | None]:
    """The conversation (guidance, tools, messages, as the protocol's own mapper reads it) and the
    instructions of any of the three session shapes; the model is the one ``compact`` runs.

    A saved session normally ends with the assistant's reply, which a request could not: the
    Messages mapper takes it here (``session=True``) instead of refusing it as a prefill."""
    from tinytitan.api.offline import detect_api, to_chat_request

    if not isinstance(doc, dict | list):
        raise SessionError("a session is a JSON array of items / messages, or an object holding one")
    if isinstance(doc, dict) and "input" not in doc and not isinstance(doc.get("messages"), list):
        raise SessionError("a session object needs 'input' (Responses) or 'messages' (Chat / Messages)")
    instructions = doc.get("instructions") if isinstance(doc, dict) else None
    chat = to_chat_request(doc, detect_api(doc), model="session", session=True)
    return chat, instructions if isinstance(instructions, str) else None


@with_model_flags(reasoning=False)
def compact(
    session: Annotated[
        str,
        typer.Argument(
            metavar="SESSION.json",
            help="A saved session (Responses input, Chat messages or an Anthropic Messages request); '-' reads stdin.",
        ),
    ],
    flags: ModelFlags = ModelFlags(),
    max_tokens: int = typer.Option(
        None, "--max-tokens", help="The note's budget in tokens (default: one eighth of the context, at most 4096)."
    ),
    instructions: str = typer.Option(
        None,
        "--instructions",
        help="With --json: the system prompt to carry verbatim before the note, as the endpoint's 'instructions' "
        "(default: the session's own). It does not steer the note.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the object POST /v1/responses/compact returns."),
) -> None:
    """Compact a saved session into a handover note, offline, with the server's own compaction."""
    import asyncio
    from dataclasses import replace

    import msgspec

    from tinytitan.api.responses.encode import compaction_object
    from tinytitan.engine.build import build_engine
    from tinytitan.engine.errors import InvalidRequest, TinyTitanError
    from tinytitan.engine.passes.compaction import compact as run_compaction

    if max_tokens is not None and max_tokens < 1:
        raise _fail(f"--max-tokens is the note's budget in tokens, at least 1 (not {max_tokens})")
    fast_cpu(not flags.stub, "compact")  # before stdin is read: a re-exec starts the process over
    try:
        settings = flags.settings(queue_limit=1)
        text = sys.stdin.read() if session == "-" else Path(session).read_text(encoding="utf-8")
        session_request, found_instructions = load_session(json.loads(text))
    except OSError as exc:
        raise _fail(f"cannot read {session}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSON errors and SessionError
        raise _fail(f"{session} is not a usable session: {exc}") from None
    except InvalidRequest as exc:
        raise _fail(f"{session} is not a usable session: {_named(exc)}") from None
    try:
        with tool_notes_held():  # a model without tool calls leaves the session's tools out, as serve does
            engine = build_engine(settings)
    except (OSError, ValueError) as exc:
        raise _fail(str(exc)) from None

    def progress(message: str) -> None:
        typer.echo(message, err=True)

    try:
        result = asyncio.run(
            run_compaction(
                engine, replace(session_request, model=engine.info.id), max_tokens=max_tokens, progress=progress
            )
        )
    except TinyTitanError as exc:  # e.g. an image part the transcript cannot hold, named where it is
        raise _fail(_named(exc)) from None
    finally:
        engine.shutdown()
    if as_json:
        typer.echo(
            json.dumps(msgspec.to_builtins(compaction_object(result, instructions or found_instructions)), indent=2)
        )
    else:
        typer.echo(result.note)
