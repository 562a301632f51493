"""serve --drafts/--no-drafts (TINYTITAN_DRAFTS): off by default (opt-in until measured), the banner says when on."""

from __future__ import annotations

from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.cli.serve import _engine_note
from tinytitan.settings import Settings

runner = CliRunner()


def test_the_flag_and_its_variable_are_listed() -> None:
    serve_help = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    assert "--drafts" in serve_help and "--no-drafts" in serve_help and "TINYTITAN_DRAFTS" in serve_help


def test_off_by_default_and_the_banner_says_when_on() -> None:
    assert Settings().drafts is False
    assert "drafts" not in _engine_note(Settings(model="m"))
    assert "prompt-lookup drafts" in _engine_note(Settings(model="m", drafts=True))
