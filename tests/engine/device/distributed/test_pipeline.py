"""Pipeline parallelism on a qwen2-shaped tiny model (mlx-lm's qwen3 offers tensor only): two ranks
on loopback decode the same greedy tokens as one process (issue #19)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tinytitan.testing.distributed import LAUNCHER
from tinytitan.testing.process import REPO_ROOT, free_port

pytestmark = pytest.mark.timeout(600)

GREEDY = r"""
import json, sys
import mlx.core as mx
from pathlib import Path
from mlx_lm.models.cache import make_prompt_cache
from tinytitan.engine.device.distributed import Distributed, detect
from tinytitan.engine.device.distributed.channel import Kind
from tinytitan.engine.device.distributed.lockstep import Session

model_dir = Path(sys.argv[1])
group = detect()
if group is None:
    from tinytitan.engine.models.mlx.loading import load_weights

    class Local:
        def collective(self, build, what, wait=None):
            value = build()
            mx.eval(value)
            return value

    model, _ = load_weights(model_dir, "float32")
    channel = Local()
else:
    dist = Distributed(group, sys.argv[2], timeout=120)
    model = dist.load(model_dir, "float32")
    channel = dist.channel
session = Session(model, channel, make_prompt_cache(model), [])
session.prefill(list(range(2000, 2005)))
token = int(mx.argmax(session.forward([2005]), axis=-1).item())
tokens = [token]
for _ in range(11):
    if group is not None:
        _, token, _, _ = dist.channel.exchange(Kind.DECODE, token)
    token = int(mx.argmax(session.forward([token]), axis=-1).item())
    tokens.append(token)
rank = group.rank if group else "-"
sys.stdout.write(f"TOKENS {json.dumps(tokens)} rank {rank}\n")  # one write: the ranks share the pipe
sys.stdout.flush()
"""


def qwen2_variant(tiny: Path, out: Path) -> Path:
    """The tiny qwen3 model as a qwen2 (which mlx-lm can pipeline): no q/k norms, zero q/k/v biases."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    shutil.copytree(tiny, out)
    config = json.loads((tiny / "config.json").read_text())
    config.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    (out / "config.json").write_text(json.dumps(config))
    weights = {
        k: v
        for k, v in load_file(str(tiny / "model.safetensors")).items()
        if "_norm.weight" not in k or "layernorm" in k
    }
    for i in range(config["num_hidden_layers"]):
        for name in ("q", "k", "v"):
            rows = weights[f"model.layers.{i}.self_attn.{name}_proj.weight"].shape[0]
            weights[f"model.layers.{i}.self_attn.{name}_proj.bias"] = np.zeros(rows, dtype=np.float32)
    save_file(weights, str(out / "model.safetensors"))
    return out


def test_pipeline_greedy_tokens_equal_one_process(tiny_dir: Path, tmp_path: Path) -> None:
    model = qwen2_variant(tiny_dir, tmp_path / "qwen2")
    script = tmp_path / "greedy.py"
    script.write_text(GREEDY)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    one = subprocess.run(
        [sys.executable, str(script), str(model)], env=env, capture_output=True, text=True, timeout=300
    )
    cmd = [sys.executable, "-c", LAUNCHER, "-n", "2", "--backend", "ring", "--starting-port", str(free_port())]
    cmd += ["--", sys.executable, str(script), str(model), "pipeline"]
    two = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)

    def tokens(out: str) -> list[list[int]]:
        return [
            json.loads(line[len("TOKENS ") : line.index(" rank ")])
            for line in out.splitlines()
            if line.startswith("TOKENS")
        ]

    (expected,) = tokens(one.stdout)
    assert len(expected) == 12
    assert tokens(two.stdout) == [expected, expected], two.stdout + two.stderr  # both ranks, same tokens
