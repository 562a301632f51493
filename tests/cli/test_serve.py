"""The CLI: help, version, the refusal of an unsafe bind, and a real ``serve --stub`` process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tinytitan import __version__
from tinytitan.cli.app import app
from tinytitan.testing.catalog import build_catalog
from tinytitan.testing.process import free_port, serve_stub_process, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_help_lists_serve_and_version() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "serve" in result.output
    assert runner.invoke(app, ["--version"]).output.splitlines()[0] == f"tinytitan {__version__}"


@pytest.fixture(scope="module")
def serve_help() -> str:
    # wide enough that rich does not shorten the longer names ("--prompt-cache-dis…")
    return runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output


@pytest.mark.parametrize(
    "flag",
    [
        "--model",
        "--model-id",
        "--host",
        "--port",
        "--api-key",
        "--cors-origin",
        "--queue-limit",
        "--max-context",
        "--reasoning",
        "--thinking",
        "--stub",
        "--log-level",
        "--prompt-cache-dir",
        "--prompt-cache-disk-mib",
        "TINYTITAN_PORT",
    ],
)
def test_serve_help_lists(serve_help: str, flag: str) -> None:
    assert flag in serve_help


def test_non_loopback_without_key_is_refused(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--stub", str(stub)])
    assert result.exit_code == 2
    assert "without --api-key" in result.output


def test_env_vars_are_read(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "--stub", str(tmp_path / "s.json")], env={"TINYTITAN_HOST": "10.1.2.3"})
    assert result.exit_code == 2 and "10.1.2.3" in result.output


def test_bad_stub_script_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    result = runner.invoke(app, ["serve", "--port", str(free_port()), "--stub", str(bad)])
    assert result.exit_code == 2 and "is not JSON" in result.output


def _chat_when_up(port: int) -> str:
    """The answer to one chat request, sent as soon as the server process listens."""
    deadline = time.monotonic() + 30
    while True:
        try:
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]},
            )
            return str(r.json()["choices"][0]["message"]["content"])
        except httpx.ConnectError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_serve_stub_process(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(
        json.dumps({"model": "scripted", "context_window": 2048, "rules": [{"reply": {"text": "hi there"}}]})
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TINYTITAN_PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinytitan", "serve", "--stub", str(stub)], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        banner = proc.stderr.readline() if proc.stderr else ""
        assert f"'scripted' at http://127.0.0.1:{port}/v1" in banner and "context 2048 tokens" in banner
        assert _chat_when_up(port) == "hi there"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, 0)], ids=["sigterm", "ctrl-c"]
)
def test_a_signal_ends_an_open_stream_with_an_error_event_and_the_server_exits(sig: int, code: int) -> None:
    """``kill`` (or mlx.launch stopping the group), or Ctrl-C, while a stream waits for its first token."""
    slow = {"model": "scripted", "rules": [{"reply": {"text": "too late", "prefill_ms": 120_000}}]}
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with serve_stub_process(slow, "--keepalive", "0.1") as server:
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as r:
            lines = r.iter_lines()
            while next(lines) != ": ping":  # the stream is open, its first token far away
                pass
            server.process.send_signal(sig)
            rest = list(lines)
        # SIGTERM: uvicorn re-raises it after a clean shutdown, as a shell expects of a killed process;
        # Ctrl-C: a clean exit, as before
        assert server.process.wait(timeout=30) == code
    (error,) = [json.loads(line[6:])["error"] for line in rest if line.startswith('data: {"error"')]
    assert error["code"] == "server_shutting_down" and rest[-2:] == ["data: [DONE]", ""]


def test_cli_import_stays_light() -> None:
    """``tinytitan --help`` must not pull in mlx, llguidance, transformers or the web stack."""
    code = (
        "import sys, tinytitan.cli.app; "
        "heavy = [m for m in ('mlx', 'mlx_lm', 'llguidance', 'transformers', 'litestar', 'uvicorn') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "[]"


def test_memory_flags_and_their_env_vars(tmp_path: Path) -> None:
    serve_help = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    for flag in ("--memory", "--memory-tools", "--memory-tool-rounds", "--memory-dir", "--memory-fsync"):
        assert flag in serve_help
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    result = runner.invoke(app, ["serve", "--stub", str(stub)], env={"TINYTITAN_MEMORY_TOOLS": "some"})
    assert result.exit_code == 2 and "--memory-tools takes off, minimal or full" in result.output
    result = runner.invoke(app, ["serve", "--stub", str(stub), "--memory-tool-rounds", "-1"])
    assert result.exit_code == 2 and "--memory-tool-rounds" in result.output


def test_serve_with_memory_from_the_environment_uses_the_launch_directory(tmp_path: Path) -> None:
    """``TINYTITAN_MEMORY=1``: a request that declares no workspace gets the directory serve started in."""
    rules = [
        {"when": {"last_role": "tool"}, "reply": {"text": "saved"}},
        {"reply": {"tool_calls": [{"name": "memory_set", "arguments": {"key": "k", "value": "v"}}]}},
    ]
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"model": "scripted", "rules": rules}))
    project = tmp_path / "project"
    project.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TINYTITAN_PORT": str(port),
        "TINYTITAN_MEMORY": "1",
        "TINYTITAN_MEMORY_DIR": str(tmp_path / "mem"),
        "TINYTITAN_MEMORY_FSYNC": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tinytitan", "serve", "--stub", str(stub)],
        env=env,
        cwd=project,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        proc.stderr.readline()
        note = proc.stderr.readline()
        assert "Memory on: tools full" in note and str(tmp_path / "mem") in note and "synced" in note
        assert _chat_when_up(port) == "saved"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    journals = list((tmp_path / "mem").glob("tinytitan/*/project-*/journal.ndjson"))
    assert len(journals) == 1 and '"key":"k"' in journals[0].read_text()


def served_catalog() -> list[str]:
    """What ``build_catalog``'s directory is served as on this machine: ``<id>@cpu`` beside each id
    where mlx has an accelerator (Metal, CUDA), as the server decides it (issue 28.4)."""
    from tinytitan.engine.device.placement import has_accelerator

    ids = ["tiny-a", "tiny-b"]
    return [v for i in ids for v in ([i, f"{i}@cpu"] if has_accelerator() else [i])]


def test_serve_a_catalog_process(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tinytitan", "serve", "--models-dir", str(root), "--port", str(port)]
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stderr=err, stdout=subprocess.DEVNULL)
        try:
            wait_healthy(proc, f"http://127.0.0.1:{port}", 120, log)
            ids = [m["id"] for m in httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"]]
            assert ids == served_catalog()
            body = {"model": "tiny-b", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
            r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)
            assert r.status_code == 200 and r.json()["model"] == "tiny-b"
        finally:
            stop(proc)
    text = log.read_text()
    served = served_catalog()
    assert f"serving a catalog of {len(served)} models ({', '.join(served)}) at http://127.0.0.1:{port}/v1" in text
    skipped = [line for line in text.splitlines() if "skipping" in line]
    assert len(skipped) == 1 and "broken" in skipped[0] and "model_type" in skipped[0]
    assert "loaded model tiny-b" in text and "Traceback" not in text


def test_a_catalog_that_cannot_be_served_is_a_clean_error(tiny_dir: Path, tmp_path: Path) -> None:
    root = build_catalog(tmp_path / "models", tiny_dir)
    (tmp_path / "empty").mkdir()
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    cases = [
        (["--models-dir", str(tmp_path / "empty")], "no loadable model in"),
        (["--models-dir", str(root), "--stub", str(stub)], "--models-dir or --stub, not both"),
        (["--models-dir", str(root), "--model-id", "x"], "--model-id cannot rename a catalog"),
        (["--models-dir", str(root), "--model", "nope"], f"it serves {', '.join(served_catalog())}"),
    ]
    for args, message in cases:
        # a free port: the port is bound (and a taken one refused) before the catalog is read
        result = runner.invoke(app, ["serve", "--port", str(free_port()), *args])
        assert result.exit_code == 2 and message in result.output, result.output


def test_the_banner_states_the_sampling_defaults_and_a_model_without_tool_calls(tmp_path: Path) -> None:
    """serve --temperature sets a server-wide default (the banner says which value came from where);
    with --memory, a model without a tool-call syntax is said once to get no memory block or tools."""
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"model": "plain", "tool_calls": False, "generation_config": {"top_k": 7}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TINYTITAN_PORT": str(port), "TINYTITAN_MEMORY_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "tinytitan", "serve", "--stub", str(stub), "--memory", "--temperature", "0.4"]
    proc = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(3)]
        assert "'plain' has no tool-call syntax: its prompts get no memory block and no tools" in lines[1]
        assert lines[2].strip() == (
            "Sampling defaults: temperature 0.4 (serve flag); top_p 0.9 (server default); "
            "top_k 7 (generation_config.json); a request's own values win"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_unknown_reasoning_level_lists_the_levels(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    result = runner.invoke(app, ["serve", "--stub", str(stub), "--reasoning", "bogus"])
    assert result.exit_code == 2
    assert "unknown reasoning level 'bogus'; one of off, on, minimal, low, medium, high, xhigh, max" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--top-p", "0", "--top-p must be in (0, 1], not 0"), ("--temperature", "3", "--temperature must be in [0, 2]")],
)
def test_a_sampling_flag_out_of_range_is_refused(tmp_path: Path, flag: str, value: str, message: str) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    result = runner.invoke(app, ["serve", "--stub", str(stub), flag, value])
    assert result.exit_code == 2 and message in result.output
