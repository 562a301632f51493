"""Slash commands: ``/help``, ``/clear``, ``/system``, ``/reasoning``, ``/max-tokens``, ``/save``,
``/load``, ``/compact``, ``/model``, ``/exit``. Each takes the chat and the rest of the line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tinytitan.chat.client import ChatError
from tinytitan.chat.images import image_part, text_only
from tinytitan.chat.session import SessionFileError, count

if TYPE_CHECKING:
    from tinytitan.chat.app import ChatApp

__all__ = ["COMMANDS", "EXIT", "HELP", "is_command", "run_command"]

EXIT = "exit"
_NAME = re.compile(r"^/[a-z]+(-[a-z]+)?$")

HELP = """\
/help               this list
/clear              start a new conversation (the system prompt stays)
/system [TEXT]      show or set the system prompt (/system - removes it)
/reasoning [LEVEL]  show or set the reasoning level (off, on, minimal, low, medium, high, xhigh, max, default)
/max-tokens [N|off] show or set the answers' output cap (off: up to the context window)
/save FILE          save the conversation (a Responses request: `tinytitan compact FILE` reads it)
/load FILE          continue a saved conversation
/image [PATH]       attach a picture to your next message (a vision model); alone: what is attached
/compact            replace the conversation by the server's compaction note
/model [ID]         list the served models, or switch to one
/exit               leave (also /quit, /bye, Ctrl-D)

Enter sends; a line ending in \\ or Alt-Enter continues; \"\"\" … \"\"\" wraps a block; pastes keep their lines.
Ctrl-C stops an answer (the conversation is kept) or clears the line; on an empty line, twice, leaves."""


def is_command(line: str) -> bool:
    """A line the chat handles itself: ``/word …`` (a path such as ``/etc/hosts`` is a message)."""
    first = line.split(maxsplit=1)[0] if line.strip() else ""
    return bool(_NAME.match(first))


def _help(chat: ChatApp, _arg: str) -> None:
    chat.say(HELP)


def _clear(chat: ChatApp, _arg: str) -> None:
    chat.session.items.clear()
    chat.say("new conversation", style="dim")


def _system(chat: ChatApp, arg: str) -> None:
    if not arg:
        chat.say(f"system prompt: {chat.session.instructions}" if chat.session.instructions else "no system prompt")
    elif arg == "-":
        chat.session.instructions = None
        chat.say("system prompt removed", style="dim")
    else:
        chat.session.instructions = arg
        chat.say("system prompt set", style="dim")


def _reasoning(chat: ChatApp, arg: str) -> None:
    from tinytitan.engine.request.reasoning import LADDER, normalize_level

    levels = chat.target.reasoning_levels  # in-process: the model's own
    if levels is None:  # a server's model: as the server publishes them (None: it does not say)
        levels = chat.target.client.reasoning_levels(chat.session.model)
    words = ", ".join(LADDER) + " or default"
    if levels == ():
        where = "this model has no reasoning switch (a level changes nothing)"
    elif levels is None:
        where = f"levels: {words} (the server applies the nearest its model renders)"
    else:
        where = f"this model renders {', '.join(levels)}"
    if not arg:
        chat.say(f"reasoning: {chat.session.reasoning or 'the server default'}; {where}")
        return
    if arg.lower() == "default":
        chat.session.reasoning = None
        chat.say("reasoning: the server default", style="dim")
        return
    level = normalize_level(arg)
    if level is None:
        raise ChatError(f"unknown reasoning level '{arg}'; one of {words}")
    chat.session.reasoning = level
    note = ""
    if levels == ():
        note = f" ({where})"
    elif levels is not None and level not in levels and level != "off":
        note = f" ({where}; the nearest is applied)"
    chat.say(f"reasoning: {level}{note}", style="dim")


def _max_tokens(chat: ChatApp, arg: str) -> None:
    from tinytitan.chat.app import cap_note

    if arg:
        if arg.lower() in ("off", "none", "0"):
            chat.session.max_output_tokens = None
        elif arg.isdigit():
            chat.session.max_output_tokens = int(arg)
        else:
            raise ChatError(f"/max-tokens takes a number of tokens or off, not '{arg}'")
    chat.say(cap_note(chat.session.max_output_tokens), style=None if not arg else "dim")


def _path(arg: str, command: str) -> Path:
    if not arg:
        raise ChatError(f"{command} needs a file name")
    return Path(arg).expanduser()


def _save(chat: ChatApp, arg: str) -> None:
    path = _path(arg, "/save")
    try:
        chat.session.save(path)
    except OSError as exc:
        raise ChatError(f"cannot write {path}: {exc.strerror or exc}") from None
    chat.say(f"saved {count(len(chat.session.items), 'item')} to {path}", style="dim")


def _load(chat: ChatApp, arg: str) -> None:
    path = _path(arg, "/load")
    try:
        model = chat.session.load(path)
    except SessionFileError as exc:
        raise ChatError(str(exc)) from None
    note = ""
    if model and model != chat.session.model:
        if chat.target.client.accepts(model):
            chat.session.model = model
        else:
            note = f"; it was saved with {model}, which this server does not serve: kept {chat.session.model}"
    loaded = f"{count(len(chat.session.items), 'item')} ({count(chat.session.turns(), 'turn')})"
    chat.say(f"loaded {loaded} from {path}{note}", style="dim")


def _image(chat: ChatApp, arg: str) -> None:
    if not arg.strip():
        n = len(chat.session.images)
        chat.say(f"{count(n, 'picture')} attached to your next message" if n else "no picture attached")
        return
    part, line = image_part(arg)
    if chat.target.client.takes_images(chat.session.model) is False:
        raise ChatError(text_only(chat.session.model))
    chat.session.images.append(part)
    chat.say(f"{line}; it goes with your next message", style="dim")


def _compact(chat: ChatApp, _arg: str) -> None:
    from tinytitan.chat.tools import tool_specs
    from tinytitan.engine.errors import InvalidRequest
    from tinytitan.engine.passes.compaction import MODE_WORDS
    from tinytitan.engine.passes.payload import decode_payload

    if not chat.session.items:
        chat.say("nothing to compact yet", style="dim")
        return
    before = len(chat.session.items)
    # the session as its turns send it (instructions, reasoning, tools): the server's prompt cache holds it
    body = chat.session.body(tool_specs() if chat.runner.confirm is not None else None)
    with chat.working("compacting"):
        result = chat.target.client.compact(body)
    output = [i for i in result.get("output") or [] if isinstance(i, dict)]
    item = next((i for i in output if i.get("type") == "compaction"), None)
    if item is None:
        raise ChatError("the server's compaction answer holds no compaction item")
    try:
        note = decode_payload(item.get("encrypted_content"))
    except InvalidRequest as exc:
        raise ChatError(f"the server's compaction note is unreadable: {exc.message}") from None
    chat.session.items[:] = [item]  # the instructions go with every turn already
    usage = result.get("usage") or {}
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens", "?")
    how = MODE_WORDS.get(str(note.get("mode")), "")
    chat.say(
        f"compacted {count(before, 'item')} into a note of {len(str(note['summary'])):,} characters"
        f"{', ' + how if how else ''}; the model read {usage.get('input_tokens', '?')} tokens ({cached} from the "
        f"prompt cache) and wrote {usage.get('output_tokens', '?')} for it",
        style="dim",
    )


def _model(chat: ChatApp, arg: str) -> None:
    models = chat.target.client.models()
    if not arg:
        for m in models:
            chat.say(("* " if m == chat.session.model else "  ") + m)
        return
    if arg not in models and not chat.target.client.accepts(arg):
        raise ChatError(f"the server does not serve '{arg}'; /model lists what it does")
    chat.session.model = arg
    chat.say(f"model: {arg}", style="dim")


COMMANDS: dict[str, Callable[[ChatApp, str], None]] = {
    "/help": _help,
    "/clear": _clear,
    "/system": _system,
    "/reasoning": _reasoning,
    "/max-tokens": _max_tokens,
    "/save": _save,
    "/load": _load,
    "/image": _image,
    "/compact": _compact,
    "/model": _model,
}


def run_command(chat: ChatApp, line: str) -> str | None:
    """Run one command; returns ``EXIT`` to leave. Raises ``ChatError`` for the user to see."""
    name, _, arg = line.strip().partition(" ")
    if name in ("/exit", "/quit", "/bye"):
        return EXIT
    handler = COMMANDS.get(name)
    if handler is None:
        raise ChatError(f"unknown command {name}; /help lists them")
    handler(chat, arg.strip())
    return None
