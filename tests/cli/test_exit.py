"""Leaving the CLI after MLX ran on a worker thread: why ``tinytitan.cli.app`` ends with ``os._exit``.

A thread that ran a compiled MLX function and ended without freeing its streams made the process
abort while the interpreter finalized ("terminate called without an active exception"): 9 runs in
20 for a bare thread, about one in six for ``compact`` with the tiny model — whether or not the
thread was joined first. ``device_thread.release()`` (the device worker's last act) frees them. This
test runs a real command through the Typer app itself, so the interpreter finalizes normally, with
no ``os._exit`` to hide an abort.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_APP = "import sys\nfrom tinytitan.cli.app import app\napp(sys.argv[1:], prog_name='tinytitan')\n"


def test_compact_with_a_real_model_exits_cleanly_without_os_exit(tiny_dir: Path, tmp_path: Path) -> None:
    """``compact`` loads the model on one thread and generates on another; three runs, each exit 0."""
    pytest.importorskip("mlx_lm")
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"messages": [{"role": "user", "content": "Write hello.txt"}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", _APP, "compact", str(session), "--model", str(tiny_dir), "--max-tokens", "8"]
    for _ in range(3):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "terminate called" not in done.stderr
        assert done.stdout.strip()  # the note
