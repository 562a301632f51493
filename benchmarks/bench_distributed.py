"""Distributed serving figures (issue #19), printing ratios. Not part of the test run.

    python benchmarks/bench_distributed.py [--tokens 24] [--rounds 200] [--model DIR]

(a) collective latency over loopback (mlx.launch -n 2 --backend ring): one ``all_sum`` of the
    control message (4 int32: what rank 0 broadcasts per token) and of one hidden state of the
    Qwen3-0.6B shape (1,024 float32 = 4 KiB: what tensor parallelism sums twice per layer), and the
    per-token cost that implies for the 0.6B shape (28 layers × 2 + 1 control message);
(b) greedy decode tok/s of the Qwen3-0.6B shape (random weights, fp32 + OpenBLAS): 2 ranks
    tensor-parallel (the lockstep ``Session`` both ranks run when serving) ÷ one process (the
    same ``Session`` code without a group: plain ``load_weights``) — and whether the two produced
    the same tokens. On this one 2-core machine both ranks share the cores and the "link" is
    loopback: a correctness run, not a speed claim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LAUNCHER = "from mlx._distributed_utils.launch import main; main()"

WORKER = r"""
import json, os, sys, time
from tinytitan.cpu_blas import ensure_openblas
ensure_openblas()
import mlx.core as mx
from pathlib import Path
from mlx_lm.models.cache import make_prompt_cache
from tinytitan.engine.device.distributed import Distributed, detect
from tinytitan.engine.device.distributed.channel import Kind
from tinytitan.engine.device.distributed.lockstep import Session

mode, model_dir, tokens, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
group = detect()
out = {}
if mode == "collectives":
    dist = Distributed(group, timeout=120)
    small = mx.zeros((4,), dtype=mx.int32)
    hidden = mx.ones((1, 1, 1024), dtype=mx.float32)
    for name, x in (("control_4_int32", small), ("hidden_4_KiB", hidden)):
        for _ in range(10):
            mx.eval(mx.distributed.all_sum(x, stream=mx.cpu))
        began = time.perf_counter()
        for _ in range(rounds):
            mx.eval(mx.distributed.all_sum(x, stream=mx.cpu))
        out[name] = (time.perf_counter() - began) / rounds
else:
    class _Local:  # the Session's channel without a group: evaluate, no deadline
        def collective(self, build, what, wait=None):
            value = build(); mx.eval(value); return value
    if group is None:
        from tinytitan.engine.models.mlx.loading import load_weights
        model, _ = load_weights(model_dir, "auto")
        channel = _Local()
    else:
        dist = Distributed(group, "tensor", timeout=600)
        model = dist.load(model_dir, "auto")
        channel = dist.channel
    prompt = list(range(1000, 1032))
    session = Session(model, channel, make_prompt_cache(model), [])
    logits = session.forward(prompt)
    token = int(mx.argmax(logits, axis=-1).item())
    produced = [token]
    began = time.perf_counter()
    for _ in range(tokens):
        if group is not None:
            _, token, _, _ = dist.channel.exchange(Kind.DECODE, token)  # the per-token broadcast serving does
        logits = session.forward([token])
        token = int(mx.argmax(logits, axis=-1).item())
        produced.append(token)
    out = {"tok_s": tokens / (time.perf_counter() - began), "tokens": produced}
if group is None or group.rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
"""


def run(mode: str, model: Path, tokens: int, rounds: int, ranks: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = [sys.executable, "-c", WORKER, mode, str(model), str(tokens), str(rounds)]
    cmd = (
        script if ranks == 1 else [sys.executable, "-c", LAUNCHER, "-n", str(ranks), "--backend", "ring", "--", *script]
    )
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(f"{mode} ({ranks} ranks) printed no result:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def main() -> None:
    import argparse

    from tinytitan.testing.tiny_model import tiny_model_dir

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--model", type=Path, default=None)
    args = parser.parse_args()
    model = args.model or tiny_model_dir("0.6b")

    c = run("collectives", model, args.tokens, args.rounds, 2)
    per_token = 28 * 2 * c["hidden_4_KiB"] + c["control_4_int32"]
    print(
        f"(a) all_sum over loopback: control message {c['control_4_int32'] * 1e3:.2f} ms, "
        f"4 KiB hidden state {c['hidden_4_KiB'] * 1e3:.2f} ms; "
        f"0.6B shape tensor-parallel: {per_token * 1e3:.1f} ms of collectives per token "
        f"(caps decode at {1 / per_token:.1f} tok/s)"
    )
    one = run("decode", model, args.tokens, args.rounds, 1)
    two = run("decode", model, args.tokens, args.rounds, 2)
    same = one["tokens"] == two["tokens"]
    print(
        f"(b) 0.6B greedy decode: 1 process {one['tok_s']:.2f} tok/s, 2 ranks tensor-parallel "
        f"{two['tok_s']:.2f} tok/s — ratio {two['tok_s'] / one['tok_s']:.2f} "
        f"(same {args.tokens + 1} tokens: {same}; one 2-core machine, loopback: not a speed claim)"
    )


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"[{time.perf_counter() - t:.0f} s]")
