"""``serve --prompt-cache-dir``: a long prefix, a picture's image tokens included, stays warm across a real
server restart."""

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


SYSTEM, AFTER = LONG[: len(LONG) // 2], LONG[: len(LONG) // 3] + "What is it?"


def ask_with(server: ServerProcess, picture_bytes: bytes) -> dict[str, Any]:
    """A long system prompt, then a picture and more text: the picture sits inside the first whole blocks."""
    from tinytitan.testing.images import data_url

    image = {"type": "image_url", "image_url": {"url": data_url(picture_bytes)}}
    body = {
        "model": "tiny-v",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": [image, {"type": "text", "text": AFTER}]},
        ],
        "max_tokens": 4,
        "temperature": 0,
    }
    response = httpx.post(server.v1 + "/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return dict(response.json())


def image_positions(model_dir: Path, color: tuple[int, int, int]) -> list[int]:
    """Where the picture's image tokens sit in the prompt ``ask_with`` sends."""
    from tinytitan.engine.device.images import VIRTUAL_BASE
    from tinytitan.engine.models.mlx import MlxBackend
    from tinytitan.engine.request import ChatRequest, Message
    from tinytitan.testing.images import checked_picture, image_message
    from tinytitan.testing.server import live_server

    with live_server(MlxBackend(str(model_dir), model_id="tiny-v")) as live:
        turn = image_message(checked_picture(color), AFTER)
        tokens = live.prompt_tokens(ChatRequest(model="tiny-v", messages=(Message("system", SYSTEM), turn)))
    return [i for i, t in enumerate(tokens) if t >= VIRTUAL_BASE]


def test_a_picture_is_warm_after_a_restart_and_another_is_not(tiny_vision_dir: Path, tmp_path: Path) -> None:
    """The disk tier keys image tokens by the picture's content, as memory does: after a restart the
    same picture's blocks are read back, a different picture's never past its first image token."""
    from tinytitan.testing.images import picture

    red, blue = (200, 10, 10), (10, 10, 200)
    positions = image_positions(tiny_vision_dir, red)
    assert positions == image_positions(tiny_vision_dir, blue)
    cache_dir = tmp_path / "kv"
    args = ("--model", str(tiny_vision_dir), "--model-id", "tiny-v", "--prompt-cache-dir", str(cache_dir))
    with serve_process(*args) as server:
        cold = ask_with(server, picture("png", 100, 50, red))
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 and list(cache_dir.glob(f"*{SUFFIX}"))
    with serve_process(*args, "--prompt-cache-entries", "0") as server:  # nothing in memory to help
        warm = ask_with(server, picture("png", 100, 50, red))
        other = ask_with(server, picture("png", 100, 50, blue))
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] > positions[-1], warm["usage"]
    assert warm["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"]
    assert 0 < other["usage"]["prompt_tokens_details"]["cached_tokens"] <= positions[0], other["usage"]
