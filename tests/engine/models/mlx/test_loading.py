"""The compute dtype: a quantized checkpoint runs dequantized in fp32 on the CPU (issue #3 part 7)."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten

from tinytitan.engine.build import build_catalog
from tinytitan.engine.device import placement
from tinytitan.engine.device import thread as device_thread
from tinytitan.engine.device.placement import compute_dtype
from tinytitan.engine.errors import ModelLoadFailed
from tinytitan.engine.models.mlx import MlxBackend, loading
from tinytitan.engine.request import ChatRequest, Message, Sampling
from tinytitan.engine.service import Engine
from tinytitan.settings import Settings
from tinytitan.testing.catalog import build_catalog as lay_out_catalog
from tinytitan.testing.catalog import link_model
from tinytitan.testing.loop import run
from tinytitan.testing.process import free_port, start_serve
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
    assert compute_dtype("auto", "cpu") == "float32"
    on_cpu = mx.default_device() == mx.cpu  # CI: the mlx[cpu] wheel; a GPU keeps the checkpoint's dtype
    assert compute_dtype("auto") == ("float32" if on_cpu else None)
    assert compute_dtype("native") is None
    assert compute_dtype("bfloat16") == "bfloat16"


@pytest.mark.usefixtures("device")  # the test loads the model itself, as the device worker does
def test_a_quantized_checkpoint_is_dequantized_to_float32_on_the_cpu(quantized_dir: Path) -> None:
    backend = MlxBackend(str(quantized_dir), device="cpu")  # the default device of CI's mlx[cpu]
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


@pytest.mark.usefixtures("device")  # this thread runs the model, as the device worker would
def test_a_model_loaded_on_one_thread_runs_on_another() -> None:
    # MLX streams are thread-local and Gemma 4's RoPE keeps a lazily built ``_freqs`` outside its
    # parameters: the batch runner's thread could not evaluate it unless loading did
    import threading

    from mlx_lm.generate import generation_stream

    from tinytitan.engine.models.mlx.loading import load_weights
    from tinytitan.testing.families import family_dir

    loaded: list[nn.Module] = []

    def load() -> None:
        device_thread.claim()  # a device thread of its own: the model is loaded on one, run on another
        loaded.append(load_weights(family_dir("gemma-4"), "auto")[0])

    loader = threading.Thread(target=load)
    loader.start()
    loader.join()
    with mx.stream(generation_stream):  # as the batch runner does, on this (another) thread
        logits = loaded[0](mx.array([[1, 2, 3]]))
        mx.eval(logits)
    assert logits.shape[:2] == (1, 3)


def test_a_cpu_variant_is_built_and_run_for_real_on_the_cpu_device(
    quantized_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28.4: ``<id>@cpu`` through ``build_catalog`` as a machine with an accelerator lists it —
    the same code, run here: its weights load and it decodes inside the CPU's device context, in
    fp32 (dequantized from a 4-bit checkpoint), under a cache identity that names the device."""
    import threading

    entered: list[tuple[str, str | None]] = []
    context = placement.device_context

    def recording(device: str | None) -> object:
        entered.append((threading.current_thread().name, device))
        return context(device)

    monkeypatch.setattr(placement, "has_accelerator", lambda: True)  # what lists the variant
    monkeypatch.setattr(placement, "device_context", recording)
    models = build_catalog(Settings(models_dirs=(str(lay_out_catalog(tmp_path / "models", quantized_dir)),)))
    assert models.ids() == ["tiny-a", "tiny-a@cpu", "tiny-b", "tiny-b@cpu"]
    cpu, default = models.backend("tiny-a@cpu"), models.backend("tiny-a")
    assert isinstance(cpu, MlxBackend) and isinstance(default, MlxBackend)
    assert (cpu.device, default.device) == ("cpu", None)
    engine = Engine(models)
    try:
        request = ChatRequest(
            model="tiny-a@cpu", messages=(Message("user", "Hi"),), max_tokens=3, sampling=Sampling(seed=1)
        )
        done = run(engine.complete(request))
    finally:
        engine.shutdown()
    assert done.finished.usage is not None and done.finished.usage.completion_tokens == 3
    assert models.resident == "tiny-a@cpu" and not default.loaded
    assert quantized_layers(cpu._model) == 0 and float_dtypes(cpu._model) == {mx.float32}
    # loading and decoding both ran in the CPU's context, on the one device thread
    assert {device for _thread, device in entered} == {"cpu"} and len({t for t, _d in entered}) == 1
    # a snapshot of the variant is never offered to the default engine, nor the reverse
    assert cpu.identity == loading.model_identity(cpu.source.path, "auto", "cpu") != default.identity


def test_auto_is_float32_on_the_cpu_device_beside_an_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mx, "default_device", lambda: mx.gpu)  # a Mac's or a CUDA machine's default
    assert compute_dtype("auto") is None  # the accelerator runs the checkpoint's own dtype
    assert compute_dtype("auto", "cpu") == "float32"  # its <id>@cpu variant runs in fp32


def test_a_tokenizer_that_cannot_be_read_is_one_line_from_serve(tiny_dir: Path, tmp_path: Path) -> None:
    """A failed load is the one-line refusal and exit 2, with no traceback before it (issue 36 item 6):
    a tokenizer.json that passes the file checks but not the tokenizer library."""
    model = link_model(tiny_dir, tmp_path / "m")
    (model / "tokenizer.json").unlink()
    (model / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "Nope"}}))
    with pytest.raises(ModelLoadFailed, match="its tokenizer could not be read"):
        loading.load_tokenizer(model)
    proc = start_serve("--model", str(model), "--port", str(free_port()))
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("tinytitan serve: model 'm' could not be loaded from") and "tokenizer" in last
