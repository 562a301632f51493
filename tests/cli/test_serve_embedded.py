"""A fresh machine: no --model, an empty Hugging Face cache, offline — ``tinytitan serve`` still answers,
says what it does while the model converts and loads, and reports ``loading`` then ``ok`` on ``/health``.

Runs the real CLI as a user would (a subprocess with the repository on PYTHONPATH), with an empty
HF_HOME, HF_HUB_OFFLINE=1 and an empty TinyTitan cache, so the embedded SmolLM2 is found, converted
from its GGUF file and served (issue 12).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tinytitan.testing.process import free_port, stop, wait_started

ROOT = Path(__file__).resolve().parents[2]


def test_fresh_offline_serve_answers_with_the_embedded_model(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "TINYTITAN_MODEL")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TINYTITAN_CACHE_DIR": str(tmp_path / "tinytitan"),
        "TINYTITAN_PORT": str(port),
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tinytitan", "serve"], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    states: list[str] = []
    steps: list[str] = []

    def ready() -> bool:
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
        states.append(health["status"])
        steps.append(health.get("step", ""))
        return states[-1] == "ok"

    try:
        wait_started(proc, ready, 120)
        assert states[0] == "loading" and states[-1] == "ok" and states.count("ok") == 1  # in this order
        # the port answers from the start, the conversion included (before the web stack is up)
        assert any(step.startswith("converting SmolLM2-135M-Instruct.Q4_1.gguf") for step in steps), steps
        body = {
            "model": "SmolLM2-135M-Instruct",
            "messages": [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}],
            "temperature": 0,
        }
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        assert "Paris" in r.json()["choices"][0]["message"]["content"]
        # the README's question at the model's own sampling (no values sent): right on every seed
        asked = {**body, "messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 32}
        del asked["temperature"]
        for seed in range(10):
            r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={**asked, "seed": seed}, timeout=300)
            answer = r.json()["choices"][0]["message"]["content"]
            assert "Paris" in answer, f"seed {seed}: {answer!r}"
        banner = log.read_text()
        assert "serving the embedded SmolLM2-135M-Instruct" in banner and "the hub is offline" in banner
        assert "TinyTitan serving 'SmolLM2-135M-Instruct'" in banner
        said = [line for line in banner.splitlines() if line.startswith("TinyTitan")]
        assert said[0] == "TinyTitan: converting SmolLM2-135M-Instruct.Q4_1.gguf (98 MB) into an MLX model, once…"
        assert "TinyTitan: loading weights (98 MB, as float32)…" in said
        assert said[-1].startswith("TinyTitan serving 'SmolLM2-135M-Instruct'")  # the banner once ready
        assert "Traceback" not in banner
        # plain lines, no log records; that it has no tools is said once, under the banner, in words
        assert "WARNING" not in banner and " INFO " not in banner and "no tool-call parser" not in banner
        before, after = banner.split("TinyTitan serving 'SmolLM2-135M-Instruct'", 1)
        assert all(line.startswith("TinyTitan: ") for line in before.splitlines() if "GET /health" not in line)
        assert [line.split(":")[0] for line in after.splitlines()[1:4]] == ["Model", "Tools", "Sampling defaults"]
        assert banner.count("tool-call syntax") == 1
    finally:
        stop(proc)
