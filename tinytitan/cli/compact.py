"""``tinytitan compact SESSION.json``: compact a saved session offline, with the server's own code.

The session may be a Responses ``input`` array (or an object with ``input``), a Chat ``messages``
array (or an object with ``messages``), or an Anthropic Messages request. It is mapped to neutral
messages and handed to ``tinytitan.engine.compaction.compact`` — the same function behind
``POST /v1/responses/compact`` — over a backend built exactly as ``serve`` builds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from tinytitan.engine.request import Message

__all__ = ["SessionError", "compact", "load_session"]


class SessionError(ValueError):
    """A session file that cannot be compacted; the message says why."""


def _fail(message: str) -> typer.Exit:
    typer.secho(f"tinytitan compact: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def _anthropic_text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    parts: list[str] = []
    for block in blocks if isinstance(blocks, list) else ():
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") not in ("thinking", "redacted_thinking"):
            parts.append(f"[{block.get('type')} omitted]")
    return "\n".join(parts)


def _from_anthropic(request: dict[str, Any]) -> list[Message]:
    from tinytitan.engine.request import Message, ToolCallSpec

    out: list[Message] = []
    if request.get("system"):
        out.append(Message("system", _anthropic_text(request["system"])))
    for m in request.get("messages") or ():
        if not isinstance(m, dict):
            raise SessionError("every message must be an object")
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        texts: list[str] = []
        calls: list[ToolCallSpec] = []
        for b in blocks:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_use":
                calls.append(
                    ToolCallSpec(str(b.get("id", "")), str(b.get("name", "")), json.dumps(b.get("input", {})))
                )
            elif kind == "tool_result":
                text = _anthropic_text(b.get("content", ""))
                prefix = "Error: " if b.get("is_error") else ""
                out.append(Message("tool", prefix + text, tool_call_id=str(b.get("tool_use_id", ""))))
            else:
                texts.append(_anthropic_text([b]))
        text = "\n".join(t for t in texts if t)
        if text or calls:
            out.append(Message(str(m.get("role", "user")), text, tool_calls=tuple(calls)))
    return out


def _from_chat(messages: list[Any]) -> list[Message]:
    import msgspec

    from tinytitan.api.chat_completions.protocol import ChatCompletionRequest, ChatMessage
    from tinytitan.api.chat_completions.translate import to_chat_request

    try:
        wire = msgspec.convert(messages, type=list[ChatMessage])
    except msgspec.ValidationError as exc:
        raise SessionError(f"not a Chat messages array: {exc}") from None
    return list(to_chat_request(ChatCompletionRequest(model="session", messages=wire)).messages)


def _is_anthropic(doc: dict[str, Any]) -> bool:
    if "system" in doc or ("max_tokens" in doc and "messages" in doc and "stop_sequences" in doc):
        return True
    for m in doc.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in content
        ):
            return True
    return False


def load_session(doc: Any) -> tuple[list[Message], list[str], str | None]:
    """Messages, decoded compaction notes and instructions from any of the three session shapes."""
    from tinytitan.api.responses.inputs import map_input

    def responses(value: Any) -> tuple[list[Message], list[str]]:
        mapped = map_input(value, resolve=lambda _id: None)
        guidance = [Message("system", g) for g in mapped.guidance]
        return guidance + mapped.messages, mapped.notes

    from tinytitan.engine.request import Message

    if isinstance(doc, dict):
        instructions = doc.get("instructions") if isinstance(doc.get("instructions"), str) else None
        if "input" in doc:
            messages, notes = responses(doc["input"])
            return messages, notes, instructions
        if isinstance(doc.get("messages"), list):
            if _is_anthropic(doc):
                return _from_anthropic(doc), [], None
            return _from_chat(doc["messages"]), [], None
        raise SessionError("a session object needs 'input' (Responses) or 'messages' (Chat / Messages)")
    if isinstance(doc, list):
        if any(isinstance(x, dict) and ("type" in x or "call_id" in x) for x in doc):
            messages, notes = responses(doc)
            return messages, notes, None
        if _is_anthropic({"messages": doc}):
            return _from_anthropic({"messages": doc}), [], None
        return _from_chat(doc), [], None
    raise SessionError("a session is a JSON array of items / messages, or an object holding one")


def compact(
    session: Annotated[
        Path,
        typer.Argument(
            metavar="SESSION.json",
            help="A saved session (Responses input, Chat messages or an Anthropic Messages request).",
        ),
    ],
    model: str = typer.Option(
        None,
        "--model",
        envvar="TINYTITAN_MODEL",
        metavar="DIR_OR_ID",
        help="The model that writes the note: a local directory or a hub id.",
    ),
    stub: str = typer.Option(None, "--stub", metavar="SCRIPT.json", help="Use a scripted backend (tests)."),
    max_tokens: int = typer.Option(
        None,
        "--max-tokens",
        help="The note's budget in tokens (default: one eighth of the context, at most 4096).",
    ),
    instructions: str = typer.Option(
        None,
        "--instructions",
        help="Instructions to carry in the --json output (as the endpoint echoes them).",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the object POST /v1/responses/compact returns."
    ),
    max_context: int = typer.Option(None, "--max-context", help="Cap the context window (tokens)."),
) -> None:
    """Compact a saved session into a handover note, offline, with the server's own compaction."""
    import asyncio

    from tinytitan.api.responses.encode import compaction_object
    from tinytitan.cli.serve import build_backend
    from tinytitan.engine.backends.stub import ScriptError
    from tinytitan.engine.compaction import compact as run_compaction
    from tinytitan.engine.errors import InvalidRequest, TinyTitanError
    from tinytitan.engine.service import Engine
    from tinytitan.settings import Settings

    if not model and not stub:
        raise _fail("give --model DIR_OR_ID (or --stub SCRIPT.json)")
    try:
        doc = json.loads(session.read_text(encoding="utf-8"))
        messages, notes, found_instructions = load_session(doc)
    except OSError as exc:
        raise _fail(f"cannot read {session}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSON errors and SessionError
        raise _fail(f"{session} is not a usable session: {exc}") from None
    except InvalidRequest as exc:
        where = f" (at {exc.param})" if exc.param else ""
        raise _fail(f"{session} is not a usable session: {exc.message}{where}") from None
    try:
        backend = build_backend(Settings(model=model, stub=stub, max_context=max_context))
        engine = Engine(backend, queue_limit=1)
    except (ScriptError, OSError, ValueError) as exc:
        raise _fail(str(exc)) from None

    def progress(message: str) -> None:
        typer.echo(message, err=True)

    try:
        result = asyncio.run(
            run_compaction(
                engine, engine.info.id, messages, notes=notes, max_tokens=max_tokens, progress=progress
            )
        )
    except TinyTitanError as exc:
        raise _fail(exc.message) from None
    finally:
        engine.shutdown()
    if as_json:
        typer.echo(json.dumps(compaction_object(result, instructions or found_instructions), indent=2))
    else:
        typer.echo(result.note)
