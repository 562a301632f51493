"""``serve``'s KV-cache flags (issue 42): their checks, and what the banner says is in force."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.cli.options import parse_size
from tinytitan.testing.process import serve_process
from tinytitan.testing.waiting import wait_until

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--kv-bits", "3"], {}, "--kv-bits takes 4 or 8, not 3"),
        (["--kv-bits", "4", "--kv-group-size", "16"], {}, "--kv-group-size takes 32, 64, 128, not 16"),
        (["--kv-bits", "8", "--quantized-kv-start", "-5"], {}, "--quantized-kv-start must be 0 or more"),
        (["--max-kv-memory", "lots"], {}, "--max-kv-memory takes a size such as 8GiB or 512MiB, or off; not 'lots'"),
        ([], {"TINYTITAN_KV_BITS": "2"}, "--kv-bits takes 4 or 8, not 2"),
    ],
)
def test_a_bad_kv_flag_is_one_line_and_status_2(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    stub = tmp_path / "s.json"
    stub.write_text(json.dumps({"rules": []}))
    result = runner.invoke(app, ["serve", "--stub", str(stub), *args], env=env)
    assert result.exit_code == 2 and message in result.output, result.output


def test_sizes_are_read_in_binary_units() -> None:
    assert parse_size("8GiB", "f") == 8 * 2**30 == parse_size("8g", "f") == parse_size("8 GB", "f")
    assert parse_size("512MiB", "f") == 512 * 2**20 and parse_size("1.5G", "f") == 3 * 2**29
    assert parse_size("off", "f") == 0 == parse_size("0", "f")
    with pytest.raises(ValueError, match="f takes a size"):
        parse_size("-1G", "f")


def test_the_banner_says_the_kv_cache_and_the_budget_in_force(tiny_kv_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    args = ["--model", str(tiny_kv_dir), "--kv-bits", "4", "--log-level", "info"]
    with serve_process(*args, stderr=log) as server:
        wait_until(lambda: httpx.get(server.url + "/ready", timeout=5).status_code == 200, limit=120, what="ready")
        wait_until(lambda: "KV memory budget" in log.read_text(), what="the budget line")
        facts = httpx.get(server.v1 + "/models?details=true").json()["data"][0]["tinytitan"]
    text = log.read_text()
    (banner,) = [line for line in text.splitlines() if line.startswith("TinyTitan serving")]
    assert "4-bit KV cache (group 64)" in banner
    (budget,) = [line for line in text.splitlines() if line.startswith("KV memory budget")]
    assert "free at start, less" in budget and "of weights" in budget
    assert facts["kv_cache"] == {"kv_bits": 4, "kv_group_size": 64, "quantized_kv_start": 0}
