"""tinytitan.cli.common: what every subcommand shares."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan.engine.device import thread as device_thread

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
from tinytitan.cli.common import fast_cpu
from tinytitan.engine.device import thread as device_thread

fast_cpu(False, "serve")  # a stub serves: no model, nothing to check
before = device_thread.check_installed()
fast_cpu(True, "serve")  # the first thing a command that runs a model does
print(before, device_thread.check_installed(), "mlx_lm" in sys.modules)
from mlx_lm.models.activations import swiglu  # compiled at import: with the check on, checked
print(hasattr(swiglu, "__wrapped__"))
"""


def test_a_command_that_runs_a_model_turns_the_device_check_on_before_mlx_lm_loads() -> None:
    pytest.importorskip("mlx_lm")
    env = {**os.environ, device_thread.CHECK_ENV: "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True", "False", "True"]
