"""A rank that hangs is noticed within the timeout, on either side (issue #19)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tinytitan.engine.device.distributed.liveness import EXIT_GROUP_LOST, Watchdog
from tinytitan.testing.distributed import LAUNCHER
from tinytitan.testing.process import REPO_ROOT, free_port

HANG = """
import os, sys, time
from tinytitan.engine.device.distributed import Distributed, detect
from tinytitan.engine.device.distributed.channel import Kind

group = detect()
dist = Distributed(group, timeout=2.0)
def leave(code):
    print(f"rank {group.rank} exits {code}", flush=True)
    os._exit(code)
dist._exit = leave
hanging = int(sys.argv[1])
if group.rank == 0:
    dist.channel.exchange(Kind.PING)
    print("both ranks answered", flush=True)
    if hanging == 0:
        time.sleep(60)  # rank 0 stops sending: rank 1's wait for the next step runs out
    dist.channel.exchange(Kind.PING)
else:
    dist.channel.exchange()
    if hanging == 1:
        time.sleep(60)  # rank 1 stops answering: rank 0's exchange runs out
    dist.channel.exchange()
print(f"rank {group.rank} was not stopped", flush=True)
"""


def test_watchdog_fires_once_past_the_deadline() -> None:
    fired: list[str] = []
    dog = Watchdog(0.2, fired.append, tick=0.02)
    with dog.guard("a quick step"):
        pass
    with dog.guard("a step that hangs"):
        deadline = time.monotonic() + 30
        while not fired and time.monotonic() < deadline:
            time.sleep(0.02)
    assert fired == ["no answer within 0.2 s while a step that hangs"]
    assert dog.fired


def test_watchdog_quiet_while_nothing_is_guarded() -> None:
    fired: list[str] = []
    dog = Watchdog(0.05, fired.append, tick=0.01)
    threading.Event().wait(0.3)
    dog.close()
    assert fired == []


@pytest.mark.parametrize("hanging", [1, 0])
def test_a_hung_rank_stops_the_other(tmp_path: Path, hanging: int) -> None:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    cmd = [sys.executable, "-c", LAUNCHER, "-n", "2", "--backend", "ring", "--starting-port", str(free_port())]
    cmd += ["--", sys.executable, str(script), str(hanging)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=110, stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert "both ranks answered" in out
    waiting = 1 - hanging
    assert f"rank {waiting} exits {EXIT_GROUP_LOST}" in out, out
    assert "was not stopped" not in out
