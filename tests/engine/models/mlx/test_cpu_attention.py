"""CPU prefill attention in NumPy: the same numbers as mlx's own, and taken only where it applies."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

mx = pytest.importorskip("mlx.core")

from mlx_lm.models.base import create_causal_mask  # noqa: E402

from tinytitan import cpu_share  # noqa: E402
from tinytitan.engine.models.mlx import cpu_attention  # noqa: E402

pytestmark = pytest.mark.usefixtures("device")  # these tests stand in for the device worker


@pytest.fixture(autouse=True)
def on_the_cpu(device: None) -> Iterator[None]:
    """This attention is for a model on the CPU: it and mlx's are compared there, on any machine
    (a GPU's fp32 matmuls round differently)."""
    with mx.stream(mx.cpu):
        yield


@pytest.fixture
def mlx_attention() -> Iterator[Callable[..., Any]]:
    """mlx's own attention (the wrapper taken out for the test, put back after)."""
    was = cpu_attention.installed()
    cpu_attention.uninstall()
    yield mx.fast.scaled_dot_product_attention
    if was:
        cpu_attention.install()


def _masks(batch: int, heads: int, length: int, keys: int) -> dict[str, Any]:
    offset = keys - length
    return {
        "none": None,
        "causal": "causal",
        "causal array": create_causal_mask(length, offset),
        "left padding": create_causal_mask(length, offset, left_padding=mx.array([2] * batch)),
        "per head": mx.random.uniform(shape=(batch, heads, length, keys), key=mx.random.key(1)) > 0.3,
    }


SHAPES = [  # batch, query heads, key heads, queries, keys, value width
    (1, 16, 8, 300, 700, 64),  # grouped heads, two blocks, a cached prefix
    (2, 4, 4, 5, 9, 64),  # a batch, one head per key head
    (1, 8, 2, 600, 600, 64),  # three blocks, no prefix
    (3, 6, 2, 257, 1000, 32),  # a block of one row; values narrower than keys (plamo2)
]


@pytest.mark.parametrize("mask_name", ["none", "causal", "causal array", "left padding", "per head"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_mlx(mlx_attention: Callable[..., Any], shape: tuple[int, ...], mask_name: str) -> None:
    batch, q_heads, kv_heads, length, keys, value_width = shape
    rng = mx.random.key(0)
    q = mx.random.normal((batch, q_heads, length, 64), key=rng)
    cache = mx.random.normal((batch, kv_heads, keys + 256, 64), key=mx.random.key(2))
    k = cache[:, :, :keys]  # a view into a larger buffer, as a KV cache hands it out
    v = mx.random.normal((batch, kv_heads, keys, value_width), key=mx.random.key(3))
    mask = _masks(batch, q_heads, length, keys)[mask_name]
    ours = cpu_attention.attention(q, k, v, scale=0.125, mask=mask)
    theirs = mlx_attention(q, k, v, scale=0.125, mask=mask)
    assert ours.shape == theirs.shape
    assert mx.abs(ours - theirs).max().item() < 1e-4


@pytest.mark.parametrize("share", [1, 2])
def test_the_heads_go_to_as_many_threads_as_the_machine_has_free(
    monkeypatch: pytest.MonkeyPatch, mlx_attention: Callable[..., Any], share: int
) -> None:
    """On a busy machine (``tinytitan.cpu_share`` gives the products one thread) the calling thread
    computes every head itself: no hand-off to workers to wait on; with two, the workers do."""
    monkeypatch.setattr(cpu_attention, "_THREADS", 2)
    monkeypatch.setattr(cpu_share, "threads", lambda most: min(most, share))
    where: set[str] = set()
    real = cpu_attention._Heads.attend

    def attend(heads: Any, units: range) -> None:
        where.add(threading.current_thread().name)
        real(heads, units)

    monkeypatch.setattr(cpu_attention._Heads, "attend", attend)
    q = mx.random.normal((1, 8, 40, 32), key=mx.random.key(4))
    k = mx.random.normal((1, 4, 60, 32), key=mx.random.key(5))
    ours = cpu_attention.attention(q, k, k, scale=0.2, mask="causal")
    assert mx.abs(ours - mlx_attention(q, k, k, scale=0.2, mask="causal")).max().item() < 1e-4
    if share == 1:
        assert where == {threading.current_thread().name}
    else:
        assert where and all(name.startswith("tinytitan-attention") for name in where)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    taken: list[int] = []
    real = cpu_attention.attention

    def spy(q: Any, k: Any, v: Any, *, scale: float, mask: Any = None) -> Any:
        taken.append(q.shape[2])
        return real(q, k, v, scale=scale, mask=mask)

    monkeypatch.setattr(cpu_attention, "attention", spy)
    cpu_attention.install()
    return taken


@pytest.mark.parametrize(
    ("what", "length", "dtype", "mask", "extra"),
    [
        ("a decode step", 1, "float32", None, {}),
        ("bfloat16", 8, "bfloat16", "causal", {}),
        ("attention sinks", 8, "float32", "causal", {"sinks": "zeros"}),
        ("an additive mask", 8, "float32", "additive", {}),
    ],
)
def test_leaves_to_mlx(
    monkeypatch: pytest.MonkeyPatch, what: str, length: int, dtype: str, mask: Any, extra: dict[str, Any]
) -> None:
    taken = _spy(monkeypatch)
    q = mx.random.normal((1, 4, length, 32)).astype(getattr(mx, dtype))
    k = mx.random.normal((1, 2, 16, 32)).astype(getattr(mx, dtype))
    if mask == "additive":
        mask = mx.zeros((length, 16), dtype=q.dtype)
    if extra.get("sinks") == "zeros":
        extra = {"sinks": mx.zeros((4,), dtype=q.dtype)}
    out = mx.fast.scaled_dot_product_attention(q, k, k, scale=0.2, mask=mask, **extra)
    assert out.shape == (1, 4, length, 32)
    assert taken == [], what


def test_takes_a_prompt_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch)
    q = mx.random.normal((1, 4, 8, 32))
    k = mx.random.normal((1, 2, 16, 32))
    mx.fast.scaled_dot_product_attention(q, k, k, scale=0.2, mask="causal")
    assert taken == [8]


def test_leaves_another_thread_to_mlx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the device thread's prompt chunks come here; any other thread's call goes to mlx's own."""
    taken = _spy(monkeypatch)
    mlx_calls: list[str] = []
    monkeypatch.setattr(cpu_attention, "_original", lambda *_, **__: mlx_calls.append(threading.current_thread().name))
    q = mx.random.normal((1, 4, 8, 32))
    k = mx.random.normal((1, 2, 16, 32))
    other = threading.Thread(
        target=lambda: mx.fast.scaled_dot_product_attention(q, k, k, scale=0.2, mask="causal"), name="not-the-device"
    )
    other.start()
    other.join()
    assert (taken, mlx_calls) == ([], ["not-the-device"])


@pytest.mark.parametrize(
    ("dtype", "where", "applies"),
    [
        ("float32", "cpu", True),
        (mx.float32, "cpu", True),
        ("bfloat16", "cpu", False),
        ("float16", "cpu", False),
        (None, "cpu", False),  # --dtype native: the checkpoint's own, not known to be float32
        ("float32", "gpu", False),
    ],
)
def test_installed_only_for_a_float32_cpu_model(
    mlx_attention: Callable[..., Any], dtype: Any, where: str, applies: bool
) -> None:
    assert cpu_attention.install_for(dtype, where) is applies
    assert cpu_attention.installed() is applies
    assert (mx.fast.scaled_dot_product_attention is mlx_attention) is not applies


def test_install_for_the_default_device(mlx_attention: Callable[..., Any]) -> None:
    assert cpu_attention.install_for("float32", None) is (mx.default_device() == mx.cpu)


def test_install_is_idempotent_and_uninstall_restores(mlx_attention: Callable[..., Any]) -> None:
    cpu_attention.install()
    wrapped = mx.fast.scaled_dot_product_attention
    cpu_attention.install()
    assert mx.fast.scaled_dot_product_attention is wrapped is not mlx_attention
    cpu_attention.uninstall()
    assert mx.fast.scaled_dot_product_attention is mlx_attention
    assert not cpu_attention.installed()


def test_a_model_prefill_gives_mlx_s_logits(mlx_attention: Callable[..., Any], tiny_dir: Path) -> None:
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model

    model, _ = load_model(tiny_dir)
    prompt = mx.array([[(i * 37) % 500 + 3 for i in range(600)]])  # more than two blocks

    def last_logits() -> Any:
        cache = make_prompt_cache(model)
        model(prompt[:, :400], cache=cache)  # a second chunk attends to a cached prefix
        return model(prompt[:, 400:], cache=cache)[0, -1]

    theirs = last_logits()
    cpu_attention.install()
    ours = last_logits()
    assert mx.abs(ours - theirs).max().item() < 1e-3
    assert mx.argmax(ours).item() == mx.argmax(theirs).item()


def test_a_float32_cpu_model_reads_its_prompts_with_it_on_the_device_thread(
    mlx_attention: Callable[..., Any], tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine installs it when it loads a float32 model on the CPU, and its own device thread's
    prompt chunks come here (the test's thread, claimed by the fixture, asks for nothing)."""
    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.engine.request import ChatRequest, Message, ReasoningControls
    from tinytitan.engine.service import Engine
    from tinytitan.testing.loop import run

    threads: list[str] = []
    real = cpu_attention.attention

    def spy(q: Any, k: Any, v: Any, *, scale: float, mask: Any = None) -> Any:
        threads.append(threading.current_thread().name)
        return real(q, k, v, scale=scale, mask=mask)

    monkeypatch.setattr(cpu_attention, "attention", spy)
    engine = Engine(MlxBackend(str(tiny_dir), dtype="float32", device="cpu"))
    try:
        request = ChatRequest(
            model=engine.info.id,
            messages=(Message("user", "Say something."),),
            max_tokens=2,
            reasoning=ReasoningControls(enable_thinking=False),
        )
        run(engine.complete(request))
    finally:
        engine.shutdown()
    assert cpu_attention.installed()
    assert threads and threading.current_thread().name not in threads
