"""serve --drafts/--no-drafts (TINYTITAN_DRAFTS): on by default, reaching the backend; the banner says so.
serve --draft-model (TINYTITAN_DRAFT_MODEL): reaching the backend, or refused in one line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from tinytitan.cli import serve
from tinytitan.cli.app import app
from tinytitan.cli.banner import engine_note as _engine_note
from tinytitan.settings import Settings
from tinytitan.testing.families import family_dir
from tinytitan.testing.process import free_port, start_serve

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
    # a backend that turned them off (this mlx-lm lacks what they need: mlx_lm_adapter.problems)
    assert "drafts" not in _engine_note(Settings(model="m"), SimpleNamespace(drafts=False))


def test_the_draft_model_flag_reaches_the_settings_and_the_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    serve_help = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    assert "--draft-model" in serve_help and "TINYTITAN_DRAFT_MODEL" in serve_help
    seen: list[Settings] = []
    monkeypatch.setattr(serve, "run_server", seen.append)
    for args, env in ((["--draft-model", "small"], {}), ([], {"TINYTITAN_DRAFT_MODEL": "small"})):
        assert runner.invoke(app, ["serve", "--model", "m", *args], env=env).exit_code == 0
    assert [s.draft_model for s in seen] == ["small", "small"]
    assert "prompt-lookup drafts and small's" in _engine_note(seen[0])
    assert _engine_note(Settings(model="m", draft_model="/models/Qwen3-0.6B/")).endswith("drafts and Qwen3-0.6B's")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "m", "--no-drafts"], "which --no-drafts turns off: drop one"),
        (["--stub", "s.json"], "leave it out with --stub or --models-dir"),
    ],
)
def test_a_draft_model_that_cannot_draft_is_refused(
    monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    monkeypatch.setattr(serve, "run_server", lambda _s: pytest.fail("started"))
    result = runner.invoke(app, ["serve", *args, "--draft-model", "small"])
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith("tinytitan serve: --draft-model ") and says in line


def test_a_draft_model_of_another_tokenizer_is_one_line_at_start(tiny_dir: Path) -> None:
    other = family_dir("llama-3")
    proc = start_serve("--model", str(tiny_dir), "--draft-model", str(other), "--port", str(free_port()))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == "" and "Traceback" not in err
    *progress, refusal = err.splitlines()  # the loading display's lines (a terminal clears them), then one
    assert all(line.startswith("TinyTitan: loading") for line in progress)
    assert refusal.startswith(f"tinytitan serve: --draft-model {other}: its tokenizer is not ")
