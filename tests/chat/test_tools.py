"""The chat's client-side tools: read a file, list a directory."""

from __future__ import annotations

import json
from pathlib import Path

from tinytitan.chat.tools import MAX_FILE_BYTES, TOOLS, run_tool, tool_specs


def test_specs_are_responses_function_tools() -> None:
    specs = tool_specs()
    assert [s["name"] for s in specs] == ["read_file", "list_directory"]
    assert all(s["type"] == "function" and s["parameters"]["required"] == ["path"] for s in specs)


def test_read_file_and_its_cap(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    assert run_tool("read_file", json.dumps({"path": str(tmp_path / "a.txt")})) == "hello"
    (tmp_path / "big.txt").write_text("x" * (MAX_FILE_BYTES + 10))
    out = run_tool("read_file", json.dumps({"path": str(tmp_path / "big.txt")}))
    assert out.startswith("x" * MAX_FILE_BYTES) and "truncated" in out


def test_list_directory(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("")
    (tmp_path / "sub").mkdir()
    assert run_tool("list_directory", json.dumps({"path": str(tmp_path)})) == "sub/\nb.txt"
    assert run_tool("list_directory", json.dumps({"path": str(tmp_path / "sub")})) == "(empty directory)"


def test_failures_are_one_line_for_the_model(tmp_path: Path) -> None:
    assert run_tool("read_file", json.dumps({"path": str(tmp_path / "no")})).startswith("error: No such file")
    assert run_tool("read_file", "{not json").startswith("error: ")
    assert run_tool("read_file", "[1]") == "error: arguments must be a JSON object"
    assert run_tool("read_file", json.dumps({"path": 3})) == "error: 'path' must be a non-empty string"
    assert run_tool("rm", "{}") == f"error: there is no tool named 'rm'; available: {', '.join(TOOLS)}"
