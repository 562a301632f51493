"""Finding the group and choosing the parallelism (issue #19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tinytitan.engine.device.distributed.group import DistributedError, choose_parallelism, launched_backend
from tinytitan.engine.device.distributed.lockstep import chunks
from tinytitan.engine.device.distributed.shard import parallelism_for


def test_launched_backend_from_the_environment() -> None:
    assert launched_backend({}) is None
    assert launched_backend({"MLX_RANK": "0", "MLX_HOSTFILE": "hosts.json"}) == "ring"
    assert launched_backend({"MLX_RANK": "1", "MLX_IBV_DEVICES": "devices.json"}) == "jaccl"
    assert launched_backend({"OMPI_COMM_WORLD_SIZE": "2"}) == "mpi"
    assert launched_backend({"MLX_HOSTFILE": ""}) is None


def test_auto_prefers_tensor_then_pipeline() -> None:
    assert choose_parallelism("auto", ("tensor", "pipeline"), "qwen2") == "tensor"
    assert choose_parallelism("auto", ("pipeline",), "x") == "pipeline"
    assert choose_parallelism("pipeline", ("tensor", "pipeline"), "qwen2") == "pipeline"


def test_unoffered_parallelism_is_refused_by_name() -> None:
    with pytest.raises(
        DistributedError, match="no pipeline parallelism for the 'qwen3' architecture; it offers: tensor"
    ):
        choose_parallelism("pipeline", ("tensor",), "qwen3")
    with pytest.raises(DistributedError, match="cannot shard"):
        choose_parallelism("auto", (), "gpt2")


def test_tiny_model_architecture_offers_tensor_only(tiny_dir: Path) -> None:
    """mlx-lm's qwen3 has ``shard`` but no pipeline stages (qwen2 has both)."""
    config = json.loads((tiny_dir / "config.json").read_text())
    assert parallelism_for(config, "auto", 2) == "tensor"
    with pytest.raises(DistributedError, match="pipeline"):
        parallelism_for(config, "pipeline", 2)
    assert parallelism_for({**config, "model_type": "qwen2"}, "pipeline", 2) == "pipeline"


def test_tensor_parallel_needs_heads_divisible_by_ranks(tiny_dir: Path) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    with pytest.raises(DistributedError, match="num_key_value_heads"):
        parallelism_for(config, "tensor", 4)  # 2 kv heads


def test_prefill_chunks_cut_as_generate_step_does() -> None:
    assert chunks(1, 512) == [1]
    assert chunks(5, 2) == [2, 2, 1]
    assert chunks(4, 2) == [2, 1, 1]
    assert sum(chunks(1000, 256)) == 1000 and chunks(1000, 256)[-1] == 1
