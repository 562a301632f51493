"""Leaving the CLI after MLX ran on the device thread: the entry point's ``os._exit`` and why it stays.

A thread that ran a compiled MLX function and ends without freeing its streams can make the process
abort while the interpreter finalizes ("terminate called without an active exception"): 9 runs in
20 for a bare thread. ``device_thread.release()`` (the device worker's last act) frees them, and
``tests/engine/device/test_thread.py`` shows a released thread exits cleanly. That is not enough
for the whole CLI: ``compact`` on the tiny model, run through ``app()`` with a normal finalization,
still aborted once in three runs in CI (mlx 0.32.4, after the release and a joined worker; 0 in 42
on a developer machine), so ``tinytitan.cli.app.main`` — what the ``tinytitan`` script runs — leaves
with ``os._exit`` once MLX is loaded, after flushing its streams. These tests run that entry point
as a user does and hold it to a clean exit: the status, the output, and no abort.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_MAIN = "import sys\nfrom tinytitan.cli.app import main\nsys.argv[0] = 'tinytitan'\nmain()\n"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", _MAIN, *args], env=env, capture_output=True, text=True, timeout=300)


def test_compact_with_a_real_model_exits_cleanly(tiny_dir: Path, tmp_path: Path) -> None:
    """``compact`` loads and generates on the device thread; three runs, each exit 0 with the note printed."""
    pytest.importorskip("mlx_lm")
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"messages": [{"role": "user", "content": "Write hello.txt"}]}))
    for _ in range(3):
        done = _run("compact", str(session), "--model", str(tiny_dir), "--max-tokens", "8")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "terminate called" not in done.stderr
        assert done.stdout.strip()  # the note: flushed before os._exit


def test_a_refusal_through_the_entry_point_keeps_its_exit_status(tiny_dir: Path, tmp_path: Path) -> None:
    """A refusal leaves through the same exit with its documented status and one line."""
    pytest.importorskip("mlx_lm")
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"messages": "not a list"}))
    done = _run("compact", str(session), "--model", str(tiny_dir), "--max-tokens", "8")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is not a usable session" in done.stderr
    assert "Traceback" not in done.stderr and "terminate called" not in done.stderr
