"""``serve --prompt-cache-dir``: a long prefix stays warm across a real server restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tinytitan.engine.prompt_cache.file import SUFFIX
from tinytitan.testing.process import ServerProcess, serve_process

LONG = "Here is the project's coding standard, read it carefully before you answer. " * 40


def ask(server: ServerProcess) -> dict[str, Any]:
    body = {
        "model": "tiny",
        "messages": [{"role": "system", "content": LONG}, {"role": "user", "content": "Say hi."}],
        "max_tokens": 6,
        "temperature": 0,
    }
    response = httpx.post(server.v1 + "/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_first_request_after_a_restart_reuses_the_prefix(tiny_dir: Path, tmp_path: Path) -> None:
    cache_dir = tmp_path / "kv"
    args = ("--model", str(tiny_dir), "--model-id", "tiny", "--prompt-cache-dir", str(cache_dir))
    with serve_process(*args) as server:
        cold = ask(server)
    # SIGTERM: a graceful shutdown lets the background writer finish
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert list(cache_dir.glob(f"*{SUFFIX}"))
    with serve_process(*args, "--prompt-cache-entries", "0") as server:  # nothing in memory to help
        warm = ask(server)
    cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < warm["usage"]["prompt_tokens"]
    assert cached % 256 == 0  # whole blocks
    assert warm["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
