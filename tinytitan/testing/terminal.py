"""``tinytitan chat`` in a real pseudo-terminal (pexpect), for the terminal tests."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from tinytitan.testing.process import REPO_ROOT

__all__ = ["ANSI", "PROMPT", "plain", "spawn_chat"]

PROMPT = ">>> "
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>78]|\r")


def plain(text: str) -> str:
    """Terminal output without escape sequences or carriage returns."""
    return ANSI.sub("", text)


def spawn_chat(*args: str, data_home: Path, cwd: Path | None = None, timeout: float = 60, **env: str) -> Any:
    """``python -m tinytitan chat ARGS`` on a 100×30 pseudo-terminal; history under ``data_home``."""
    import pexpect

    full_env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "XDG_DATA_HOME": str(data_home),
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
        **env,
    }
    full_env.pop("NO_COLOR", None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "tinytitan", "chat", *args],
        env=full_env,
        cwd=str(cwd or REPO_ROOT),
        encoding="utf-8",
        codec_errors="replace",
        timeout=timeout,
        dimensions=(30, 100),
    )
