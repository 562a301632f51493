"""tools/manual.py: the committed man page and completion scripts are what the app generates now.

A new option, command or help text without `python tools/manual.py` fails here; so does a
``TINYTITAN_*`` variable read anywhere in the package that the man page would not describe.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer
import typer.main

from tinytitan.testing.missing import missing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def manual() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tinytitan_tools_manual", ROOT / "tools" / "manual.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_man_page_and_completions_are_current(manual: ModuleType) -> None:
    stale = [str(p.relative_to(ROOT)) for p in manual.stale_files()]
    assert stale == [], f"run: python tools/manual.py (stale: {', '.join(stale)})"


def test_check_mode_exits_0_when_current() -> None:
    done = subprocess.run([sys.executable, "tools/manual.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def app_with_a_new_option(manual: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The real app, its serve command given one more option, as if someone added it and did not regenerate."""
    real = manual._app

    def extra(shiny: int = typer.Option(3, "--shiny-new", help="A new knob.")) -> None:
        """Unused."""

    new_option = typer.main.get_command(_one_command(extra)).params[0]

    def patched() -> Any:
        root = real()
        root.commands["serve"].params.append(new_option)
        return root

    monkeypatch.setattr(manual, "_app", patched)
    yield


def _one_command(function: Any) -> typer.Typer:
    app = typer.Typer()
    app.command()(function)
    return app


def test_an_option_added_without_regenerating_makes_every_file_stale(
    manual: ModuleType, app_with_a_new_option: None
) -> None:
    stale = sorted(str(p.relative_to(ROOT)) for p in manual.stale_files())
    assert stale == [
        "completions/_tinytitan",
        "completions/tinytitan.bash",
        "completions/tinytitan.fish",
        "man/tinytitan.1",
    ]
    assert "shiny\\-new" in manual.man_page()


def test_every_tinytitan_variable_is_documented(manual: ModuleType) -> None:
    assert manual.undocumented_variables() == []


def test_a_new_variable_in_the_source_must_be_documented(
    manual: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "tinytitan"
    package.mkdir()
    (package / "new.py").write_text('os.environ.get("TINYTITAN_SOMETHING_NEW")\n')
    monkeypatch.setattr(manual, "ROOT", tmp_path)
    assert manual.undocumented_variables() == ["TINYTITAN_SOMETHING_NEW"]


@pytest.fixture(scope="module")
def rendered() -> str:
    if not shutil.which("man"):
        missing("man is not installed (apt-get install man-db)")
    env = {**os.environ, "MANWIDTH": "100", "MANPAGER": "cat", "PAGER": "cat", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["man", "-l", str(ROOT / "man" / "tinytitan.1")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not done.stderr.strip(), done.stderr  # no roff warnings
    return done.stdout


def test_man_page_renders_every_command_option_and_variable(manual: ModuleType, rendered: str) -> None:
    from tinytitan.cli.polish import walk

    for section in ("NAME", "SYNOPSIS", "COMMANDS", "EXAMPLES", "ENVIRONMENT", "FILES", "EXIT STATUS"):
        assert f"\n{section}\n" in rendered
    for path, command in walk(manual._app()):
        if path:
            assert f"tinytitan {' '.join(path)}" in rendered
        for param in command.params:
            for flag in getattr(param, "opts", []):
                if flag.startswith("-"):
                    assert flag in rendered
    for name in manual.environment():
        assert name in rendered
    for name in ("HF_HUB_OFFLINE", "--prompt-cache-dir", "memory/", "130"):
        assert name in rendered
