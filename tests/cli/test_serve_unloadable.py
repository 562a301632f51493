"""A model that cannot load (issue 25, item 1), against a real ``serve`` process.

At start-up it is refused: exit 2, one line naming the path and what is missing — never a server
that answers only 500. A load that fails later (a catalog switch to a model whose weights went
missing) answers 503 in the protocol's envelope, naming the model and the cause.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tinytitan.testing.catalog import build_catalog
from tinytitan.testing.process import free_port, start_serve, stop, wait_started


def _without_weights(tiny_dir: Path, dest: Path) -> Path:
    """A half-finished download: config, tokenizer and template, but no weights."""
    dest.mkdir()
    for item in tiny_dir.iterdir():
        if item.suffix != ".safetensors":
            (dest / item.name).write_bytes(item.read_bytes())
    return dest


def test_a_model_directory_without_weights_is_refused_at_start(tiny_dir: Path, tmp_path: Path) -> None:
    model = _without_weights(tiny_dir, tmp_path / "half")
    proc = start_serve("--model", str(model), "--port", str(free_port()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err == f"tinytitan serve: {model} cannot be served: no .safetensors weights (an unfinished download?)\n"


def test_truncated_weights_are_refused_at_start(tiny_dir: Path, tmp_path: Path) -> None:
    model = _without_weights(tiny_dir, tmp_path / "cut")
    with (tiny_dir / "model.safetensors").open("rb") as full:
        (model / "model.safetensors").write_bytes(full.read(1_000_000))
    proc = start_serve("--model", str(model), "--port", str(free_port()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.count("\n") == 1 and "Traceback" not in out + err
    assert err.startswith(f"tinytitan serve: {model} cannot be served: model.safetensors is truncated (1.0 of ")


@pytest.mark.parametrize(
    ("path", "envelope", "used_before"),
    [
        ("/v1/chat/completions", "openai", True),  # the weights fail to load at the switch
        ("/v1/messages", "anthropic", True),
        ("/v1/responses", "openai", True),
        ("/v1/chat/completions", "openai", False),  # the model's files are checked on its first request
    ],
)
def test_a_catalog_model_whose_weights_went_missing_answers_503(
    tiny_dir: Path, tmp_path: Path, path: str, envelope: str, used_before: bool
) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve("--models-dir", str(root), "--model", "tiny-a", "--port", str(port))
    messages = [{"role": "user", "content": "x"}]
    try:
        wait_started(proc, lambda: httpx.get(url + "/ready").status_code == 200, 120)
        for model in ("tiny-b", "tiny-a") if used_before else ():  # b loaded once, then a resident again
            chat = {"model": model, "messages": messages, "max_tokens": 2}
            assert httpx.post(url + "/v1/chat/completions", json=chat, timeout=120).status_code == 200
        (root / "tiny-b" / "model.safetensors").unlink()  # the link only: the weights stay for tiny-a
        body = {"model": "tiny-b", "max_tokens": 2}
        body |= {"input": "x"} if path == "/v1/responses" else {"messages": messages}
        r = httpx.post(url + path, json=body, timeout=120)
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert "model 'tiny-b' could not be loaded" in error["message"]
        cause = "No safetensors found" if used_before else "no .safetensors weights"
        assert cause in error["message"]
        if envelope == "anthropic":
            assert r.json()["type"] == "error" and error["type"] == "api_error"
        else:
            assert error["code"] == "model_unavailable"
        again = {"model": "tiny-a", "messages": messages, "max_tokens": 2}
        assert httpx.post(url + "/v1/chat/completions", json=again, timeout=120).status_code == 200  # still serving
    finally:
        stop(proc)
    out, err = proc.communicate(timeout=30)
    assert "Traceback" not in out + err


@pytest.mark.usefixtures("device")  # the test writes the wrong weights with MLX itself
def test_weights_that_fail_to_load_stop_the_server_with_one_line(tiny_dir: Path, tmp_path: Path) -> None:
    """Files that pass the start-up check but are not this model's weights: the load fails after the
    server started; ``serve`` stops and exits 2 with the cause (never a server that answers 500)."""
    import mlx.core as mx

    model = _without_weights(tiny_dir, tmp_path / "wrong")
    mx.save_safetensors(str(model / "model.safetensors"), {"nothing.weight": mx.zeros((2, 2))})
    proc = start_serve("--model", str(model), "--port", str(free_port()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in out + err and "TinyTitan serving" not in err
    assert err.splitlines()[-1] == (
        f"tinytitan serve: model 'wrong' could not be loaded from {model}: "
        "Received 1 parameters not in model: nothing.weight."
    )


@pytest.mark.usefixtures("device")  # the test writes the wrong weights with MLX itself
def test_a_refusal_of_a_model_without_tools_is_the_only_line_after_the_progress(tmp_path: Path) -> None:
    """No log record before a refusal: the note that a model has no tool-call syntax belongs to the
    banner, and a server that never starts has none."""
    import mlx.core as mx

    from tinytitan.testing.families import family_dir

    model = _without_weights(family_dir("llama-3"), tmp_path / "plain")  # a template no tool parser reads
    mx.save_safetensors(str(model / "model.safetensors"), {"nothing.weight": mx.zeros((2, 2))})
    proc = start_serve("--model", str(model), "--port", str(free_port()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    said = [line for line in err.splitlines() if not line.startswith("TinyTitan: ")]  # the loading steps
    assert said == [f"tinytitan serve: model 'plain' could not be loaded from {model}: " + said[0].split(": ", 2)[2]]
    assert "tool" not in err
