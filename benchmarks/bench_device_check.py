"""What ``TINYTITAN_DEVICE_CHECK=1`` costs: a checked MLX call, and a decode step of a small model.

    python benchmarks/bench_device_check.py [--model PATH] [--steps 64]

(a) one MLX call that only builds a graph node (``mx.add``), unchecked and checked, on the device
    thread: the check's own cost per call;
(b) a greedy decode step (forward + sample + evaluate) of ``--model`` (default: the tests' tiny
    model) with the check off and on, and the ratio;
(c) how many checked calls one such step makes ((c) × the cost in (a) bounds what it adds).
Not part of the test run.
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinytitan.engine.device import thread as device_thread


def per_call(mx: Any, n: int = 200_000) -> float:
    a, b = mx.ones((4,)), mx.ones((4,))
    return min(timeit.repeat(lambda: mx.add(a, b), number=n, repeat=5)) / n


def decode_step(mx: Any, model: Any, steps: int) -> float:
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    token = mx.array([[1, 2, 3, 4]])
    mx.eval(model(token, cache=cache))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(steps):
            token = mx.argmax(model(token[:, -1:], cache=cache)[:, -1:], axis=-1)
            mx.eval(token)
        best = min(best, (time.perf_counter() - t) / steps)
    return best


def checked_calls(mx: Any, model: Any) -> int:
    """Calls into the check's wrapper during one decode step (counted with a profile hook)."""
    wrapper = device_thread._checked(print, "count").__code__
    count = 0

    def profile(frame: Any, event: str, _: Any) -> None:
        nonlocal count
        count += event == "call" and frame.f_code is wrapper

    sys.setprofile(profile)
    decode_step(mx, model, 1)
    sys.setprofile(None)
    return count // (1 + 3)  # decode_step runs a warm-up forward and three timed rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=64)
    args = parser.parse_args()
    import mlx.core as mx
    from mlx_lm.utils import load_model

    from tinytitan.testing.tiny_model import tiny_model_dir

    device_thread.claim()
    model, _ = load_model(args.model or tiny_model_dir())
    plain_call, plain_step = per_call(mx), decode_step(mx, model, args.steps)
    device_thread.install_check(force=True)
    checked_call, checked_step = per_call(mx), decode_step(mx, model, args.steps)
    calls = checked_calls(mx, model)
    device_thread.remove_check()
    print(f"(a) mx.add: {plain_call * 1e9:.0f} ns, checked {checked_call * 1e9:.0f} ns", flush=True)
    print(
        f"(b) decode step: {plain_step * 1e3:.2f} ms, checked {checked_step * 1e3:.2f} ms "
        f"(×{checked_step / plain_step:.3f})",
        flush=True,
    )
    print(f"(c) checked calls per decode step: {calls}", flush=True)


if __name__ == "__main__":
    main()
