"""``launch_group`` leaves nothing running, even when the launcher itself died first."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import pytest

from tinytitan.testing.distributed import launch_group

pytestmark = pytest.mark.timeout(600)


def _alive(pid: int) -> bool:
    """``pid`` still runs (a zombie waiting to be reaped has stopped)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_leaving_stops_every_rank_when_mlx_launch_was_killed(tiny_dir: Path) -> None:
    with launch_group(tiny_dir) as group:
        follower = group.rank_pid(1)
        group.process.send_signal(signal.SIGKILL)  # mlx.launch gone: its ranks would run on as orphans
        group.process.wait(timeout=30)
        assert _alive(follower)
    assert not _alive(follower)
