"""The tiny real model through HTTP (issue #3): every protocol serves it over the one path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.testing.process import free_port
from tinytitan.testing.server import LiveServer, live_server

ROOT = Path(__file__).resolve().parents[2]
OFF = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(scope="module")
def live(tiny_dir: Path) -> Iterator[LiveServer]:
    with live_server(MlxBackend(str(tiny_dir))) as server:
        yield server


def chat(live: LiveServer, content: str = "Say something.", **fields: Any) -> dict[str, Any]:
    body = {"model": live.engine.info.id, "messages": [{"role": "user", "content": content}], **OFF, **fields}
    r = httpx.post(live.v1 + "/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_completion_with_real_usage(live: LiveServer) -> None:
    obj = chat(live, max_tokens=6, seed=3)
    assert obj["model"] == live.engine.info.id
    usage = obj["usage"]
    assert usage["prompt_tokens"] > 5 and 0 < usage["completion_tokens"] <= 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_same_seed_same_text(live: LiveServer) -> None:
    first = chat(live, "Tell me a story.", max_tokens=12, seed=42, temperature=1.0)
    second = chat(live, "Tell me a story.", max_tokens=12, seed=42, temperature=1.0)
    assert first["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]


def test_max_tokens_five_is_length(live: LiveServer) -> None:
    obj = chat(live, max_tokens=5, seed=7, temperature=1.0)
    assert obj["choices"][0]["finish_reason"] == "length"
    assert obj["usage"]["completion_tokens"] == 5


def test_stop_string_ends_the_answer_unemitted(live: LiveServer) -> None:
    free = chat(live, "Write freely.", max_tokens=24, seed=11, temperature=1.0)["choices"][0]["message"]["content"]
    assert len(free) > 4, free
    stop = free[2:4]  # random weights: take a piece of what this seed writes
    stopped = chat(live, "Write freely.", max_tokens=24, seed=11, temperature=1.0, stop=[stop])
    text = stopped["choices"][0]["message"]["content"]
    assert stop not in text and free.startswith(text)
    assert stopped["choices"][0]["finish_reason"] == "stop"


def test_second_turn_reuses_the_prefix(live: LiveServer) -> None:
    model = live.engine.info.id
    history = [{"role": "system", "content": "You are terse. " * 20}, {"role": "user", "content": "First question?"}]
    first = httpx.post(
        live.v1 + "/chat/completions",
        timeout=120,
        json={"model": model, "messages": history, "max_tokens": 4, "seed": 1, **OFF},
    ).json()
    answer = first["choices"][0]["message"]["content"]
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Second?"}]
    second = httpx.post(
        live.v1 + "/chat/completions",
        timeout=120,
        json={"model": model, "messages": history, "max_tokens": 4, "seed": 1, **OFF},
    ).json()
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    first_tokens = _prompt_tokens(live, history[:2])
    second_tokens = _prompt_tokens(live, history)
    shared = next(
        (i for i, (a, b) in enumerate(zip(first_tokens, second_tokens, strict=False)) if a != b), len(first_tokens)
    )
    assert cached == shared > 0  # the reused prefix: everything up to where the template's renderings differ
    assert cached < second["usage"]["prompt_tokens"]


def _prompt_tokens(live: LiveServer, messages: list[dict[str, Any]]) -> list[int]:
    from tinytitan.api.offline import to_chat_request
    from tinytitan.testing.loop import run

    request = to_chat_request({"messages": messages, **OFF}, "chat", model=live.engine.info.id)
    _validated, prompt = run(live.engine.validate(request))
    return list(prompt.tokens)


def test_cached_tokens_on_every_protocol(live: LiveServer) -> None:
    model = live.engine.info.id
    system = "Context that stays the same across turns. " * 10
    body = {
        "model": model,
        "max_tokens": 3,
        "system": system,
        "thinking": {"type": "disabled"},
        "messages": [{"role": "user", "content": "hello"}],
    }
    headers = {"anthropic-version": "2023-06-01"}
    httpx.post(live.url + "/v1/messages", json=body, headers=headers, timeout=120)
    again = httpx.post(live.url + "/v1/messages", json=body, headers=headers, timeout=120).json()
    assert again["usage"]["cache_read_input_tokens"] > 0
    responses = {
        "model": model,
        "instructions": system,
        "input": "hello",
        "max_output_tokens": 3,
        "reasoning": {"effort": "none"},
    }
    httpx.post(live.v1 + "/responses", json=responses, timeout=120)
    usage = httpx.post(live.v1 + "/responses", json=responses, timeout=120).json()["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] > 0


def test_count_tokens_cli_equals_server_usage(live: LiveServer, tiny_dir: Path, tmp_path: Path) -> None:
    body = {
        "model": live.engine.info.id,
        "messages": [{"role": "user", "content": "Count these words."}],
        "max_tokens": 1,
        **OFF,
    }
    served = httpx.post(live.v1 + "/chat/completions", json=body, timeout=120).json()["usage"]["prompt_tokens"]
    request = tmp_path / "request.json"
    request.write_text(json.dumps(body))
    result = CliRunner().invoke(app, ["count-tokens", str(request), "--model", str(tiny_dir)])
    assert result.exit_code == 0, result.output
    assert int(result.output.strip().splitlines()[-1]) == served
    anthropic = httpx.post(
        live.url + "/v1/messages/count_tokens",
        headers={"anthropic-version": "2023-06-01"},
        json={
            "model": live.engine.info.id,
            "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": "Count these words."}],
        },
    )
    assert anthropic.json() == {"input_tokens": served}


def test_disconnect_stops_the_worker_within_a_token(live: LiveServer) -> None:
    backend = live.engine.backend
    assert isinstance(backend, MlxBackend)
    body = {
        "model": live.engine.info.id,
        "messages": [{"role": "user", "content": "Go on and on."}],
        "max_tokens": 2000,
        "stream": True,
        **OFF,
    }
    with httpx.stream("POST", live.v1 + "/chat/completions", json=body, timeout=120) as r:
        lines = r.iter_lines()
        seen = 0
        for line in lines:
            if '"content": "' in line and '"content": ""' not in line:
                seen += 1
                if seen == 3:
                    break
        before = backend.tokens_generated
    deadline_tokens = before + 64  # generous: the worker may be one token ahead, never hundreds
    import time

    for _ in range(500):
        if live.engine.queue.running == 0:
            break
        time.sleep(0.01)
    assert live.engine.queue.running == 0
    assert backend.tokens_generated < deadline_tokens


def test_offline_hub_id_is_a_clean_error(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "TINYTITAN_OPENBLAS": "0",
    }
    port = str(free_port())  # the port is bound first: a free one, so that the model is what fails
    proc = subprocess.run(
        [sys.executable, "-m", "tinytitan", "serve", "--model", "mlx-community/nothing-here", "--port", port],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "mlx-community/nothing-here" in proc.stderr
    assert "Traceback" not in proc.stderr
