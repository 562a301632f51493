"""serve --drafts/--no-drafts (TINYTITAN_DRAFTS): on by default, reaching the backend; the banner says so."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tinytitan.cli import serve
from tinytitan.cli.app import app
from tinytitan.cli.serve import _engine_note
from tinytitan.settings import Settings

runner = CliRunner()


def test_the_flag_and_its_variable_are_listed() -> None:
    serve_help = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    assert "--drafts" in serve_help and "--no-drafts" in serve_help and "TINYTITAN_DRAFTS" in serve_help


@pytest.mark.parametrize(
    ("args", "env", "drafts"),
    [([], {}, True), (["--no-drafts"], {}, False), ([], {"TINYTITAN_DRAFTS": "0"}, False), (["--drafts"], {}, True)],
)
def test_on_by_default_and_off_by_flag_or_variable(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], drafts: bool
) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr(serve, "run_server", seen.append)
    result = runner.invoke(app, ["serve", "--model", "m", *args], env=env)
    assert result.exit_code == 0, result.output
    assert [s.drafts for s in seen] == [drafts]


def test_the_banner_says_when_drafts_are_on() -> None:
    assert Settings().drafts is True
    assert "prompt-lookup drafts" in _engine_note(Settings(model="m"))
    assert "drafts" not in _engine_note(Settings(model="m", drafts=False))
