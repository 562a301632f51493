"""Fixtures of the device tests that drive ``MlxBatch`` on a model of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", params=["mlx attention", "NumPy attention"])
def attention(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both attentions a CPU model may run (``cpu_attention`` takes multi-token calls once a model in
    fp32 on the CPU was loaded, process-wide): each test runs under both, whatever ran before."""
    from tinytitan.engine.models.mlx import cpu_attention

    was = cpu_attention.installed()
    (cpu_attention.install if request.param == "NumPy attention" else cpu_attention.uninstall)()
    yield request.param
    (cpu_attention.install if was else cpu_attention.uninstall)()
