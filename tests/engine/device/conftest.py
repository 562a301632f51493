"""Fixtures of the device tests that drive ``MlxBatch`` on a model of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", params=["mlx attention", "our CPU attention"])
def attention(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both attentions a CPU model may run, installed process-wide once a model in fp32 on the CPU was
    loaded: mlx-lm's own, or ours — ``cpu_attention`` (NumPy) for multi-token calls and
    ``cpu_kv_attention`` (the key heads split among the cores) for a quantized cache's decode steps.
    Each test runs under both, whatever ran before."""
    from tinytitan.engine.models.mlx import cpu_attention, cpu_kv_attention

    was = cpu_attention.installed(), cpu_kv_attention.installed()
    ours = request.param == "our CPU attention"
    for module in (cpu_attention, cpu_kv_attention):
        (module.install if ours else module.uninstall)()
    yield request.param
    for module, keep in zip((cpu_attention, cpu_kv_attention), was, strict=True):
        (module.install if keep else module.uninstall)()
