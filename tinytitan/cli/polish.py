"""Conventional ``--help``: TEXT / INTEGER-style metavars, flags shown as flags, arguments on the usage
line as click writes them (``SESSION.json``, ``[PROMPT]...``), an example per command, and piped help
as wide as its longest lines (not cut at 80 columns).

Typer (0.2x) shows a value's Python type as the metavar (``<str>``, ``<int>``, ``<list[str]>``) and
gives every flag a ``<bool>``. The root group's class, ``TitanGroup``, walks the whole command tree
once it is built and gives each parameter without a metavar of its own the name click uses (TEXT,
INTEGER, FLOAT, PATH; choices as ``a|b``), each flag an empty one, and each command its examples
from ``tinytitan.cli.examples`` (after any epilog of its own). Options name their own metavar where a better
word exists (PORT, DIR, LEVEL); this only fills what they leave out, so a new option never shows a
Python type.

Mistakes on the command line are one line each, exit 2: an unknown command says what to type instead,
and an unknown option, a missing or bad value or an extra argument names the command and its
``--help`` (``one_line``) — not click's usage block with a boxed error.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

import typer.core

from tinytitan.cli.examples import EXAMPLES

__all__ = [
    "OTHER_TOOLS",
    "PIPE_WIDTH",
    "TitanGroup",
    "conventional_metavar",
    "help_option",
    "one_line",
    "usage_name",
    "walk",
]

# the click Typer runs on: its own copy (typer 0.2x) or the click package (older Typer)
_CLICK = getattr(typer.core, "_click", None) or typer.core.click  # type: ignore[attr-defined]
_USAGE_ERROR: type[Exception] = _CLICK.exceptions.UsageError
_NO_SUCH_OPTION: type[Exception] = _CLICK.exceptions.NoSuchOption
_CLICK_ERROR: type[Exception] = _CLICK.exceptions.ClickException
_ABORT: type[BaseException] = typer.Abort


def one_line(error: Any) -> str:
    """``tinytitan serve: No such option: --bogus …; see tinytitan serve --help``."""
    names: list[str] = []
    ctx = getattr(error, "ctx", None)
    while ctx is not None and ctx.parent is not None:  # the root's name is the program's ("python -m …")
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    path = " ".join(["tinytitan", *names])
    message = " ".join(error.format_message().split()).rstrip(".")
    if isinstance(error, _NO_SUCH_OPTION):  # click's guesses compare the dashes too (--bogus → --host)
        typed: str = getattr(error, "option_name", "")
        message = f"No such option: {typed}{_did_you_mean(typed, getattr(error, 'possibilities', None) or [])}"
    return f"{path}: {message}; see {path} --help"


def _did_you_mean(typed: str, options: list[str]) -> str:
    """`` (did you mean --port?)`` for the options whose names, dashes left out, are close to ``typed``'s."""
    bare = typed.lstrip("-")
    ratio = {o: difflib.SequenceMatcher(None, bare, o.lstrip("-")).ratio() for o in options if o != "--help"}
    near = sorted((o for o, r in ratio.items() if r >= 0.6), key=lambda o: -ratio[o])[:3]
    return f" (did you mean {' or '.join(near)}?)" if near else ""


# commands of other local-model tools (ollama's, mostly) and what does it here
OTHER_TOOLS = {
    "run": 'to ask a model once: tinytitan chat "PROMPT" (tinytitan chat for a conversation)',
    "pull": "to download a model: tinytitan models pull ORG/NAME",
    "list": "to list the models you can serve: tinytitan models",
    "ls": "to list the models you can serve: tinytitan models",
    "ps": "to list what a running server serves: tinytitan models --url http://127.0.0.1:8096",
    "rm": "to remove a model: tinytitan models rm ID",
}

_NAMES: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", bool: "BOOLEAN", Path: "PATH"}


def conventional_metavar(param: Any) -> str:
    """The metavar click would show: "" for a flag, TEXT / INTEGER / FLOAT / PATH, or the choices."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:  # an older Typer on click: its type knows its name
        return str(getattr(getattr(param, "type", None), "name", "text")).upper()
    if descriptor.choices is not None:
        return "|".join(str(getattr(c, "value", c)) for c in descriptor.choices)
    annotation = descriptor.annotation
    if get_origin(annotation) in (list, tuple) and get_args(annotation):
        annotation = get_args(annotation)[0]
    return _NAMES.get(annotation, "TEXT")


def _no_type(ctx: Any = None) -> None:
    return None


def usage_name(param: Any) -> str:
    """An argument on the usage line as click writes it: ``NAME`` required, ``[NAME]`` optional, ``...``
    when it repeats (typer wraps a required one in braces, which read like a choice)."""
    name = param.metavar or param.name.upper()
    name = name if param.required else f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


def _polish_param(param: Any) -> None:
    if type(param).__name__.endswith("Argument") and hasattr(param, "display_type_rich"):
        # an argument is shown by its metavar already; typer would add its Python type beside it
        param.display_type_rich = _no_type
        param._usage_display_name = lambda: usage_name(param)
    if getattr(param, "is_flag", False):
        param.metavar = ""  # no type after a flag; typer's rich panel would print <bool>
    elif param.metavar is None:
        param.metavar = conventional_metavar(param)


def _name_the_command(command: Any) -> None:
    """A usage error click raises while it parses (an option's missing value) carries no context:
    give it the command's, so ``one_line`` names the command that was mistyped. And an option whose
    value is left out before the next option (``serve --stub --port 8000``) is that error, not the
    next option taken as the value and its own value left over as an extra argument."""
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> list[str]:
        try:
            if not ctx.resilient_parsing:  # click's own completion parses what is half typed
                _values_given(command, ctx, args)
            return list(parse(ctx, args))
        except _USAGE_ERROR as error:
            if getattr(error, "ctx", None) is None:
                error.ctx = ctx  # type: ignore[attr-defined]
            raise

    command.parse_args = parse_args


def _values_given(command: Any, ctx: Any, args: list[str]) -> None:
    """``UsageError`` where an option that takes a value is followed by another of the command's options."""
    options = [p for p in command.get_params(ctx) if getattr(p, "param_type_name", "") == "option"]
    names = {name for p in options for name in (*p.opts, *p.secondary_opts)}
    valued = {
        name for p in options if not getattr(p, "is_flag", False) and not getattr(p, "count", False) for name in p.opts
    }
    at = 0
    while at < len(args) and args[at] != "--":
        typed = args[at]
        if typed in valued:
            if at + 1 < len(args) and args[at + 1] in names:
                raise _USAGE_ERROR(f"Option '{typed}' requires a value before '{args[at + 1]}'", ctx)
            at += 2
            continue
        if not typed.startswith("-") and not ctx.allow_interspersed_args:
            return  # a group's own options end at its subcommand's name
        at += 1


def help_option(command: Any) -> Any:
    """The command's ``--help`` option: made on first use and cached, so polishing it once lasts."""
    context = command.context_class(command, **(command.context_settings or {}))
    return command.get_help_option(context)


PIPE_WIDTH = 120  # piped --help: wide enough that no option name, variable or default is cut


def _pipe_width() -> None:
    """Typer's help console is 80 columns when stdout is no terminal, and it cuts table cells to fit
    (``--prompt-cache-ent…``); a pipe gets ``PIPE_WIDTH`` unless the user set a width."""
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS") and not os.environ.get("TERMINAL_WIDTH"):
        os.environ["TERMINAL_WIDTH"] = str(PIPE_WIDTH)  # read by typer.rich_utils when help is shown


class TitanGroup(typer.core.TyperGroup):
    """The root group: polishes every command under it once the tree is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _pipe_width()
        for path, command in walk(self):
            _name_the_command(command)
            for param in [*command.params, help_option(command)]:
                if param is not None:
                    _polish_param(param)
            if path in EXAMPLES and EXAMPLES[path] not in (command.epilog or ""):
                command.epilog = (command.epilog + "\n\n" if command.epilog else "") + EXAMPLES[path]

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """A mistyped command line (an unknown option, a missing or bad value, an extra argument) is
        one line naming the command and what was wrong, exit 2 — not click's usage block and boxed
        error; everything else ends as Typer ends it (``--help``, ``Ctrl-C`` 130, ``Aborted!`` 1)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            done = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except _USAGE_ERROR as error:
            typer.secho(one_line(error), err=True, fg="red")
            sys.exit(2)
        except _CLICK_ERROR as error:
            error.show()  # type: ignore[attr-defined]
            sys.exit(error.exit_code)  # type: ignore[attr-defined]
        except _ABORT:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(done if isinstance(done, int) else 0)  # an exit code, or a command's (unused) value

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """An unknown command is one line that says what to type instead (exit 2)."""
        try:
            return super().resolve_command(ctx, args)
        except _USAGE_ERROR:
            name = args[0] if args else ""
            if name.startswith("-") or name in self.commands:
                raise
            known = [n for n, c in self.commands.items() if not getattr(c, "hidden", False)]
            close = difflib.get_close_matches(name, known, n=1)
            instead = OTHER_TOOLS.get(name) or (f"did you mean '{close[0]}'?" if close else "")
            typer.secho(
                f"tinytitan: no command '{name}'; {instead or 'tinytitan --help lists them'}", err=True, fg="red"
            )
            raise typer.Exit(2) from None


def walk(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``group`` and every command under it, in the group's order, with the words that reach it."""
    found: list[tuple[tuple[str, ...], Any]] = [(path, group)]
    for name, command in getattr(group, "commands", {}).items():
        if not getattr(command, "hidden", False):
            found += walk(command, (*path, name))
    return found
