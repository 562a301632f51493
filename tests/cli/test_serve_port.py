"""``tinytitan serve`` and its port (issue 25, item 3): bound before anything loads, validated by the option."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tinytitan.testing.process import free_port, start_serve


def _on_a_taken_port(*args: str) -> tuple[int, int, str, str]:
    """``serve ARGS… --port P`` while another socket listens on P: (P, status, stdout, stderr)."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        proc = start_serve(*args, "--port", str(port))
        out, err = proc.communicate(timeout=120)
    return port, proc.returncode, out, err


def test_a_port_in_use_is_one_line_and_exit_2_before_the_model_loads(tiny_dir: Path) -> None:
    port, status, out, err = _on_a_taken_port("--model", str(tiny_dir))
    assert status == 2
    assert err == f"tinytitan serve: 127.0.0.1:{port} is in use (another server? try --port)\n"
    assert out == ""  # no banner, no "loading weights", no uvicorn "[Errno 98]"


def test_a_port_in_use_is_found_before_a_slow_load(tmp_path: Path) -> None:
    """The scripted model would take ten minutes to load: the refusal cannot have waited for it."""
    stub = tmp_path / "slow.json"
    stub.write_text(json.dumps({"load_ms": 600_000, "rules": []}))
    _port, status, out, err = _on_a_taken_port("--stub", str(stub))
    assert status == 2 and err.endswith("is in use (another server? try --port)\n")
    assert "Traceback" not in out + err


@pytest.mark.parametrize("port", ["99999", "0", "-1", "http"])
def test_the_port_option_takes_1_to_65535(port: str, tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    proc = start_serve("--stub", str(stub), "--port", port)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "Invalid value for '--port'" in err and "Traceback" not in out + err


def test_the_port_variable_is_checked_as_well(tmp_path: Path) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    proc = start_serve("--stub", str(stub), env={"TINYTITAN_PORT": "70000"})
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "TINYTITAN_PORT" in err and "65535" in err
