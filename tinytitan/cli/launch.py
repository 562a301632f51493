"""``tinytitan launch AGENT [-- ARGS]``: run a coding agent wired to a local server (``tinytitan.launch``)."""

from __future__ import annotations

from typing import Annotated

import typer

from tinytitan.cli.common import fail
from tinytitan.cli.options import (
    MaxContext,
    ModelId,
    Reasoning,
    Stub,
    Thinking,
    option,
    reasoning_level,
    server_model,
    server_url,
)

__all__ = ["launch"]


def _serve_args(**flags: object) -> list[str]:
    """``tinytitan serve`` flags for the values given (None: left to serve's default / variable)."""
    args: list[str] = []
    for name, value in flags.items():
        if value is not None:
            args += ["--" + name.replace("_", "-"), str(value)]
    return args


def launch(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="claude, codex, pi or opencode.")],
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="ARGS", help="Passed to the agent as they are (after --, so that its options are its own)."
        ),
    ] = None,
    url: str = server_url("Use", "start one"),
    model: str = server_model("Start a server with this model", "the served id to use"),
    model_id: ModelId = None,
    stub: Stub = None,
    max_context: MaxContext = None,
    reasoning: Reasoning = None,
    thinking: Thinking = None,
    api_key: Annotated[
        str | None, option("--api-key", "The server's API key (a started server requires it too).", "KEY")
    ] = None,
    code_mode: Annotated[
        bool,
        typer.Option(
            "--code-mode",
            help="Codex only: Code Mode, one freeform exec tool that runs JavaScript (for a model that takes "
            "freeform tools).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Launch even when the model's window cannot hold the agent's own first prompt.",
        ),
    ] = False,
) -> None:
    """Run Claude Code, Codex, pi or OpenCode wired to a local server: model, URL, key, context window."""
    from tinytitan.launch.run import LaunchOptions
    from tinytitan.launch.run import launch as run
    from tinytitan.launch.server import LaunchError

    try:
        reasoning_level(reasoning, thinking)  # a bad level is refused here, not by a child server's log
    except ValueError as exc:
        raise fail("launch", str(exc)) from None
    options = LaunchOptions(
        agent,
        args or [],
        url=url,
        model=model if url else None,
        api_key=api_key,
        code_mode=code_mode,
        start=bool(model or stub),
        force=force,
        serve_only=[
            flag
            for flag, value in (
                ("--stub", stub if url else None),  # without --url, --stub starts a server
                ("--model-id", model_id),
                ("--max-context", max_context),
                ("--reasoning", reasoning),
                ("--thinking", thinking),
            )
            if value is not None
        ],
        serve_args=_serve_args(
            model=None if url else model,
            model_id=model_id,
            stub=stub,
            max_context=max_context,
            reasoning=reasoning,
            thinking=thinking,
            api_key=api_key,
        ),
    )

    def progress(line: str) -> None:
        typer.secho(f"tinytitan launch: {line}", err=True, dim=True)

    try:
        code = run(options, progress)
    except LaunchError as exc:
        raise fail("launch", str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(code)
