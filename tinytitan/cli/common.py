"""What every subcommand shares: one way to fail, and the fast-CPU re-exec before any input is read."""

from __future__ import annotations

import typer

__all__ = ["allow_reexec", "fail", "fast_cpu"]

_reexec_allowed = False


def allow_reexec() -> None:
    """Called by the ``tinytitan`` entry point only: this process is ours to re-exec (a command run
    in-process — a test's ``CliRunner``, another program — never is)."""
    global _reexec_allowed
    _reexec_allowed = True


def fail(command: str, message: str) -> typer.Exit:
    """Print ``tinytitan <command>: <message>`` in red on stderr; ``raise`` the returned exit (2)."""
    typer.secho(f"tinytitan {command}: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def fast_cpu(uses_model: bool, command: str) -> None:
    """Re-exec once with OpenBLAS preloaded (tinytitan.cpu_blas) when a real model will run.

    Call it first thing — before reading stdin or a file: the re-executed process starts over and a
    stream already consumed would be empty for it. An unknown ``TINYTITAN_BLAS`` is refused (exit 2).
    """
    if not uses_model:
        return
    from tinytitan.cpu_blas import BlasChoiceError, ensure_openblas, find_blas

    try:
        find_blas()
    except BlasChoiceError as exc:
        raise fail(command, str(exc)) from None
    if _reexec_allowed:
        ensure_openblas()
