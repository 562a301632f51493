"""What every subcommand shares: one way to fail, the fast-CPU re-exec before any input is read, and
the model's load-time note about tools kept back until a request carries tools."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import typer

__all__ = ["allow_reexec", "fail", "fast_cpu", "tool_notes_held"]

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
    stream already consumed would be empty for it. An unknown ``TINYTITAN_BLAS``, or a
    ``BLIS_ARCH_TYPE`` the preloaded BLIS would abort on, is refused (exit 2).
    """
    if not uses_model:
        return
    from tinytitan import blis
    from tinytitan.cpu_blas import BlasChoiceError, ensure_openblas, find_blas

    try:
        lib = find_blas()
    except BlasChoiceError as exc:
        raise fail(command, str(exc)) from None
    if lib is not None and (why := blis.refusal(lib)):
        raise fail(command, why)
    if _reexec_allowed:
        ensure_openblas()
    from tinytitan.engine.device import thread as device_thread

    # TINYTITAN_DEVICE_CHECK: in before mlx-lm is imported, which binds mlx.core's functions at import
    device_thread.install_check()


class _ToolNotes(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and "tool" in record.getMessage():
            self.notes.append(record.getMessage())
            return False
        return True


@contextlib.contextmanager
def tool_notes_held() -> Iterator[list[str]]:
    """Hold back the MLX backend's warning, at load, that a model is served without tools (right in
    ``serve``'s log, noise in a script's): the caller shows the notes only when a request has tools."""
    logger = logging.getLogger("tinytitan.mlx")
    held = _ToolNotes()
    logger.addFilter(held)
    try:
        yield held.notes
    finally:
        logger.removeFilter(held)
