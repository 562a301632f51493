"""A catalog served with ``--kv-bits`` (issue 42): each model gets the quantized KV cache its heads allow,
``/v1/models?details=true`` says which, and switching models and back finds the quantized prefix warm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tinytitan.engine.build import build_catalog
from tinytitan.engine.kv.cache import QuantizedRow
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.settings import Settings
from tinytitan.testing.catalog import link_model
from tinytitan.testing.device import on_device
from tinytitan.testing.server import LiveServer, live_server

KV, PLAIN = "kv-a", "plain-b"  # heads of 64 (quantized at 4 bits) and of 16 (groups of 64 do not fit)
OFF = {"chat_template_kwargs": {"enable_thinking": False}}
PREFIX = "Here is a long shared context. " * 40


@pytest.fixture(scope="module")
def live(tiny_kv_dir: Path, tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("catalog")
    link_model(tiny_kv_dir, root / KV)
    link_model(tiny_dir, root / PLAIN)
    settings = Settings(models_dirs=(str(root),), kv_bits=4, max_concurrent=2, queue_limit=4)
    with live_server(build_catalog(settings), settings=settings) as server:
        yield server


def ask(live: LiveServer, model: str, text: str) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0}
    r = httpx.post(live.v1 + "/chat/completions", json={**body, **OFF}, timeout=300)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_each_model_says_its_kv_cache(live: LiveServer) -> None:
    listing = httpx.get(live.v1 + "/models?details=true").json()
    facts = {m["id"]: m["tinytitan"]["kv_cache"] for m in listing["data"]}
    assert facts[KV] == {"kv_bits": 4, "kv_group_size": 64, "quantized_kv_start": 0}
    ask(live, PLAIN, "Hello.")  # built now: its heads of 16 keep it in full precision
    listing = httpx.get(live.v1 + "/models?details=true").json()
    assert {m["id"]: m["tinytitan"]["kv_cache"] for m in listing["data"]}[PLAIN] == {"kv_bits": None}


def test_a_switch_and_back_finds_the_quantized_prefix_warm(live: LiveServer) -> None:
    """(That a warm prefix gives the tokens a cold start gives is ``test_mlx_batch_kv``'s, on the CPU.)"""
    ask(live, KV, PREFIX + "First question?")
    ask(live, PLAIN, "Something else.")
    again = ask(live, KV, PREFIX + "Second question?")
    assert [(s.previous, s.current) for s in live.engine.models.switches[-2:]] == [(KV, PLAIN), (PLAIN, KV)]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] > 100
    backend = live.engine.models.peek(KV)
    assert isinstance(backend, MlxBackend) and backend.kv is not None
    snapshots = backend.prompt_cache.snapshots(backend.identity)
    assert snapshots
    held, _n = on_device(
        lambda: backend.prompt_cache.fetch([*snapshots[-1], 0], backend.identity), worker=live.engine.device
    )
    assert held is not None and all(isinstance(c, QuantizedRow) for c in held)
