"""``tinytitan`` in a real terminal for the terminal tests: a pseudo-terminal (pexpect) to drive it,
and tmux where a test asserts what the screen shows (``Tmux.screen``: the scrollback and the
visible rows as a person sees them, after every cursor movement).

Every terminal a test opens here (``spawn``, ``spawn_chat``, ``Tmux``) is remembered until
``reap()`` ends it — its whole process group — so a test that fails half-way leaves nothing running
(``tests/cli/conftest.py`` reaps after every test). Tests wait on what the terminal shows
(``expect``, ``Tmux.wait_for``), never on time; ``WAIT`` bounds each wait, generous for a busy machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tinytitan.testing.process import REPO_ROOT

__all__ = ["ANSI", "PROMPT", "WAIT", "Tmux", "plain", "reap", "spawn", "spawn_chat"]

PROMPT = ">>> "
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>78]|\r")
WAIT = 60.0  # seconds any one wait may take: a bound for a loaded machine (pytest-timeout: 120 a test)
_opened: list[Any] = []  # pexpect children and Tmux sessions not reaped yet


def plain(text: str) -> str:
    """Terminal output without escape sequences or carriage returns."""
    return ANSI.sub("", text)


def spawn(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = WAIT,
    dimensions: tuple[int, int] = (30, 100),
    encoding: str | None = "utf-8",
) -> Any:
    """``pexpect.spawn`` (rows × columns ``dimensions``), remembered until ``reap()``."""
    import pexpect

    child = pexpect.spawn(
        command,
        args,
        env=env if env is not None else {**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        cwd=str(cwd or REPO_ROOT),
        encoding=encoding,
        codec_errors="replace",
        timeout=timeout,
        dimensions=dimensions,
    )
    _opened.append(child)
    return child


def spawn_chat(*args: str, data_home: Path, cwd: Path | None = None, timeout: float = WAIT, **env: str) -> Any:
    """``python -m tinytitan chat ARGS`` on a 100×30 pseudo-terminal; history under ``data_home``."""
    full_env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "XDG_DATA_HOME": str(data_home),
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
        **env,
    }
    full_env.pop("NO_COLOR", None)
    return spawn(sys.executable, ["-m", "tinytitan", "chat", *args], env=full_env, cwd=cwd, timeout=timeout)


def _end_group(pid: int | None) -> None:
    """SIGKILL the process group ``pid`` leads (a pseudo-terminal's session: the command and anything
    it started), if it still runs."""
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def reap() -> int:
    """End every terminal opened since the last call and its processes; how many still ran."""
    running = 0
    while _opened:
        opened = _opened.pop()
        if isinstance(opened, Tmux):
            running += opened.close()
            continue
        if opened.isalive():
            running += 1
            _end_group(opened.pid)
        with contextlib.suppress(Exception):
            opened.close(force=True)
    return running


class Tmux:
    """A command in its own tmux server (a private socket), 100×30; the pane stays after it exits."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
        width, height = 100, 30
        self.socket = f"tinytitan-test-{os.getpid()}-{secrets.token_hex(4)}"
        conf = cwd / f".{self.socket}.conf"
        conf.write_text("set -g remain-on-exit on\nset -g history-limit 10000\nset -g status off\n")
        self.env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PROMPT_TOOLKIT_NO_CPR": "1", **(env or {})}
        self.env.pop("NO_COLOR", None)
        self.env.pop("TMUX", None)
        # the status goes to a file: tmux may leave an exited command a zombie, its pane not yet dead,
        # for a while; `trap : INT` keeps the shell through the Ctrl-C a test sends the command
        self._status = cwd / f".{self.socket}.status"
        status = shlex.quote(str(self._status))
        run = f"cd {shlex.quote(str(cwd))} && {shlex.join(args)}"
        command = f"trap : INT; {run}; echo $? > {status}.tmp && mv {status}.tmp {status}"
        _opened.append(self)
        self._tmux("-f", str(conf), "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)
        self._pane = int(self._tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip() or 0)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> str:
        """Every line the pane shows and scrolled past, trailing blanks trimmed."""
        lines = self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t").splitlines()
        return "\n".join(line for line in lines if not line.startswith("Pane is dead")).rstrip("\n")

    def type(self, text: str) -> None:
        """Keys, literally (no tmux key names)."""
        self._tmux("send-keys", "-t", "t", "-l", text)

    def key(self, *names: str) -> None:
        """tmux key names: Enter, C-c, C-d, Up."""
        self._tmux("send-keys", "-t", "t", *names)

    def wait_for(self, text: str | re.Pattern[str], timeout: float = WAIT) -> str:
        """The screen once it shows ``text``; ``AssertionError`` with the screen when it never does."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if (text in screen) if isinstance(text, str) else text.search(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed {text!r}:\n{screen}")
            time.sleep(0.1)

    def exit_status(self, timeout: float = WAIT) -> int:
        """The command's exit status, once it has exited."""
        deadline = time.monotonic() + timeout
        while not self._status.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"still running:\n{self.screen()}")
            time.sleep(0.1)
        return int(self._status.read_text())

    def close(self) -> bool:
        """End the command (its process group) and the tmux server; whether the command still ran."""
        running = not self._status.exists()
        if running:
            _end_group(self._pane)  # the pane's shell and the command it runs: one process group
        self._tmux("kill-server")
        with contextlib.suppress(ValueError):
            _opened.remove(self)
        return running

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
