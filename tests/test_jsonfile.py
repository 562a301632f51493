"""``read_json``: one document from a file or stdin, errors naming the file and its role."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tinytitan.jsonfile import read_json


def test_reads_a_file_and_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.json").write_text('{"a": 1}')
    assert read_json(tmp_path / "a.json", ValueError) == {"a": 1}
    monkeypatch.setattr("sys.stdin", io.StringIO("[2]"))
    assert read_json("-", ValueError) == [2]


def test_errors_name_the_file_and_its_role(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match=r"^cannot read stub script .*missing.json: No such file"):
        read_json(tmp_path / "missing.json", LookupError, "stub script ")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(LookupError, match=r"bad.json is not JSON: "):
        read_json(tmp_path / "bad.json", LookupError)
