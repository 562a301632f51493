"""Static bash, zsh and fish completion scripts, generated from the command tree itself.

``tinytitan completion SHELL`` prints one (the repository's ``completions/`` holds the same text,
kept current by tools/manual.py). The scripts know every command, option and option value the CLI
takes — choices such as ``off|minimal|full``, files and directories — so a TAB never starts Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import typer

__all__ = ["SHELLS", "Spec", "completion", "script", "specs"]

SHELLS = ("bash", "zsh", "fish")
_PROG = "tinytitan"
_CHOICES = re.compile(r"^[a-z0-9-]+(\|[a-z0-9-]+)+$")
_FILES = re.compile(r"FILE|\.json|\.gguf|PATH")
_DIRS = re.compile(r"\bDIR\b")
_LEVELS = "off on minimal low medium high xhigh max"


@dataclass
class Option:
    names: list[str]  # --memory and --no-memory for a flag pair; -y beside --yes
    help: str
    takes_value: bool
    values: str = ""  # "a b c" choices, "@file", "@dir" or "" (free text)
    metavar: str = ""


@dataclass
class Spec:
    """One command (``path`` the words that reach it) as the scripts see it."""

    path: tuple[str, ...]
    help: str
    commands: dict[str, str] = field(default_factory=dict)  # subcommand -> its one-line help
    options: list[Option] = field(default_factory=list)
    positional: str = ""  # what a positional argument completes to: "@file" or choices
    positional_metavar: str = ""


def _first_line(text: str | None) -> str:
    line = (text or "").strip().split("\n\n")[0].replace("\n", " ")
    return line.split(". ")[0].rstrip(".")


def _values(metavar: str, name: str) -> str:
    if name in ("reasoning",) or metavar == "LEVEL":
        return _LEVELS
    if _CHOICES.match(metavar):
        return metavar.replace("|", " ")
    if _DIRS.search(metavar) and not _FILES.search(metavar):
        return "@dir"
    if _FILES.search(metavar) or _DIRS.search(metavar):
        return "@file"
    return ""


def specs(root: Any) -> list[Spec]:
    """Every command of the click tree ``root`` (the Typer app's command), root first."""
    from tinytitan.cli.polish import help_option, walk

    found: list[Spec] = []
    for path, command in walk(root):
        spec = Spec(path, _first_line(command.help))
        spec.commands = {
            name: _first_line(sub.help) for name, sub in getattr(command, "commands", {}).items() if not sub.hidden
        }
        for param in [*command.params, help_option(command)]:
            if getattr(param, "hidden", False):
                continue
            metavar = param.metavar or ""
            if type(param).__name__.endswith("Argument"):
                spec.positional = _values(metavar, param.name or "")
                spec.positional_metavar = metavar
                continue
            flag = bool(getattr(param, "is_flag", False))
            names = [*param.opts, *getattr(param, "secondary_opts", [])]
            values = "" if flag else _values(metavar, param.name or "")
            spec.options.append(Option(names, _first_line(param.help), not flag, values, "" if flag else metavar))
        found.append(spec)
    return found


def script(shell: str, root: Any) -> str:
    """The completion script for ``shell`` (bash, zsh or fish)."""
    from tinytitan.cli import completion_scripts

    render = {"bash": completion_scripts.bash, "zsh": completion_scripts.zsh, "fish": completion_scripts.fish}
    if shell not in render:
        raise ValueError(f"no completion for '{shell}': bash, zsh or fish")
    return render[shell](specs(root))


def completion(
    ctx: typer.Context,
    shell: str = typer.Argument(..., metavar="bash|zsh|fish", help="The shell to print the script for."),
) -> None:
    """Print the shell completion script for bash, zsh or fish (its --help shows how to install it)."""
    from tinytitan.cli.common import fail

    try:
        text = script(shell.lower(), ctx.find_root().command)
    except ValueError as exc:
        raise fail("completion", str(exc)) from None
    typer.echo(text, nl=False)
