"""``tinytitan compact SESSION.json``: compact a saved session offline, with the server's own code.

The session may be a Responses ``input`` array (or an object with ``input``), a Chat ``messages``
array (or an object with ``messages``), or an Anthropic Messages request. It is mapped to neutral
messages and handed to ``tinytitan.engine.passes.compaction.compact`` — the same function behind
``POST /v1/responses/compact`` — over a backend built exactly as ``serve`` builds it.
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
    from tinytitan.engine.request import Message

__all__ = ["SessionError", "compact", "load_session"]


class SessionError(ValueError):
    """A session file that cannot be compacted; the message says why."""


def _fail(message: str) -> typer.Exit:
    return fail("compact", message)


def _named(exc: TinyTitanError) -> str:
    return f"{exc.message} (at {exc.param})" if exc.param else exc.message


def load_session(doc: Any) -> tuple[list[Message], list[str], str | None]:
    """Messages, decoded compaction notes and instructions from any of the three session shapes.

    Responses input keeps its compaction notes apart (the transcript shows them as earlier
    summaries); Chat and Messages sessions go through their protocol's own mapper.
    """
    from tinytitan.api.offline import detect_api, to_chat_request
    from tinytitan.api.responses.mapping import map_input
    from tinytitan.engine.request import Message

    if not isinstance(doc, dict | list):
        raise SessionError("a session is a JSON array of items / messages, or an object holding one")
    if isinstance(doc, dict) and "input" not in doc and not isinstance(doc.get("messages"), list):
        raise SessionError("a session object needs 'input' (Responses) or 'messages' (Chat / Messages)")
    instructions = doc.get("instructions") if isinstance(doc, dict) else None
    api = detect_api(doc)
    if api == "responses":
        mapped = map_input(doc["input"] if isinstance(doc, dict) else doc, resolve=lambda _id: None)
        guidance = [Message("system", g) for g in mapped.guidance]
        return guidance + mapped.messages, mapped.notes, instructions if isinstance(instructions, str) else None
    return list(to_chat_request(doc, api, model="session").messages), [], None


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
        messages, notes, found_instructions = load_session(json.loads(text))
    except OSError as exc:
        raise _fail(f"cannot read {session}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSON errors and SessionError
        raise _fail(f"{session} is not a usable session: {exc}") from None
    except InvalidRequest as exc:
        raise _fail(f"{session} is not a usable session: {_named(exc)}") from None
    try:
        with tool_notes_held():  # a compaction sends no tools: a model without them is no news here
            engine = build_engine(settings)
    except (OSError, ValueError) as exc:
        raise _fail(str(exc)) from None

    def progress(message: str) -> None:
        typer.echo(message, err=True)

    try:
        result = asyncio.run(
            run_compaction(engine, engine.info.id, messages, notes=notes, max_tokens=max_tokens, progress=progress)
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
