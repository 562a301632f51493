"""The compute dtype: a quantized checkpoint runs dequantized in fp32 on the CPU (issue #3 part 7)."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten

from tinytitan.engine.backends.mlx import MlxBackend
from tinytitan.engine.backends.mlx.loading import compute_dtype
from tinytitan.engine.request import ChatRequest, Message, Sampling
from tinytitan.engine.service import Engine
from tinytitan.testing.loop import run
from tinytitan.testing.tiny_model import tiny_model_dir


@pytest.fixture(scope="module")
def quantized_dir() -> Path:
    return tiny_model_dir(quantize=4)


def quantized_layers(model: nn.Module) -> int:
    return sum(isinstance(m, nn.QuantizedLinear | nn.QuantizedEmbedding) for _n, m in model.named_modules())


def float_dtypes(model: nn.Module) -> set[mx.Dtype]:
    params = tree_flatten(model.parameters())
    assert isinstance(params, list)  # (path, array) pairs: no destination dict was given
    return {v.dtype for _k, v in params if mx.issubdtype(v.dtype, mx.floating)}


def test_auto_on_the_cpu_is_float32() -> None:
    assert mx.default_device() == mx.cpu  # this suite runs on the mlx[cpu] wheel
    assert compute_dtype("auto") == "float32"
    assert compute_dtype("native") is None
    assert compute_dtype("bfloat16") == "bfloat16"


def test_a_quantized_checkpoint_is_dequantized_to_float32(quantized_dir: Path) -> None:
    backend = MlxBackend(str(quantized_dir))
    backend.load()
    assert quantized_layers(backend._model) == 0
    assert float_dtypes(backend._model) == {mx.float32}


@pytest.mark.parametrize("dtype", ["native", "bfloat16"])
def test_the_dtype_setting_overrides(quantized_dir: Path, dtype: str) -> None:
    backend = MlxBackend(str(quantized_dir), dtype=dtype)
    engine = Engine(backend)
    try:
        request = ChatRequest(
            model=backend.info.id, messages=(Message("user", "Hi"),), max_tokens=3, sampling=Sampling(seed=1)
        )
        done = run(engine.complete(request))
    finally:
        engine.shutdown()
    assert done.finished.usage is not None and done.finished.usage.completion_tokens == 3
    if dtype == "native":
        assert quantized_layers(backend._model) > 0
    else:
        assert quantized_layers(backend._model) == 0 and float_dtypes(backend._model) == {mx.bfloat16}


def test_a_model_loaded_on_one_thread_runs_on_another() -> None:
    # MLX streams are thread-local and Gemma 4's RoPE keeps a lazily built ``_freqs`` outside its
    # parameters: the batch runner's thread could not evaluate it unless loading did
    import threading

    from mlx_lm.generate import generation_stream

    from tinytitan.engine.backends.mlx.loading import load_weights
    from tinytitan.testing.families import family_dir

    loaded: list[nn.Module] = []
    loader = threading.Thread(target=lambda: loaded.append(load_weights(family_dir("gemma-4"), "auto")[0]))
    loader.start()
    loader.join()
    with mx.stream(generation_stream):  # as the batch runner does, on this (another) thread
        logits = loaded[0](mx.array([[1, 2, 3]]))
        mx.eval(logits)
    assert logits.shape[:2] == (1, 3)
