"""The Typer root. Subcommands live in their own modules and import heavy things lazily."""

from __future__ import annotations

import os
import sys

import typer

from tinytitan.cli.chat import chat
from tinytitan.cli.common import allow_reexec
from tinytitan.cli.compact import compact
from tinytitan.cli.completion import completion
from tinytitan.cli.count_tokens import count_tokens
from tinytitan.cli.launch import launch
from tinytitan.cli.models import models_app
from tinytitan.cli.options import SERVE_EPILOG
from tinytitan.cli.polish import TitanGroup
from tinytitan.cli.serve import serve
from tinytitan.cpu_blas import release_sigint

__all__ = ["app", "main"]

app = typer.Typer(
    name="tinytitan",
    help="A local LLM server for coding agents: OpenAI Chat Completions, OpenAI Responses and "
    "Anthropic Messages over one generation path.",
    no_args_is_help=True,
    add_completion=False,  # `tinytitan completion SHELL` prints static scripts (no Python on TAB)
    cls=TitanGroup,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from tinytitan.cli.version import version_text

        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the versions of tinytitan, mlx and mlx-lm, the engine in use, and exit.",
    ),
) -> None:
    """TinyTitan: serve a local model to Claude Code, Codex, pi, Aider and the OpenAI / Anthropic SDKs."""


app.command("serve", epilog=SERVE_EPILOG)(serve)
app.add_typer(models_app, name="models")
app.command("count-tokens")(count_tokens)
app.command("compact")(compact)
app.command("chat")(chat)
app.command("launch")(launch)
app.command("completion")(completion)


def main() -> None:
    try:
        release_sigint()  # after the fast-CPU re-exec: a Ctrl-C pressed while Python started comes here
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    allow_reexec()
    # transformers' "Token indices sequence length is longer than …" would precede our own refusal
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        app()
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    _exit(code)


def _exit(code: object) -> None:
    """Leave without finalizing the interpreter once MLX is loaded.

    MLX frees a thread's compile cache and streams when the thread ends; when that races with
    interpreter finalization the thread is unwound through C++ frames and the process aborts
    ("terminate called without an active exception"). The device worker frees its own before it
    ends (``device_thread.release``), yet ``compact`` through ``app()`` still aborted once in three
    runs in CI, so the entry point does not finalize: everything the command owns is closed by
    then, and only the standard streams need flushing (``tests/cli/test_exit.py``).
    """
    if "mlx.core" not in sys.modules:
        raise SystemExit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    if isinstance(code, str):  # typer's message-and-exit form
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code if isinstance(code, int) else 0)
