"""--help reads like a conventional CLI's, every command shows examples that parse, and --version."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from tinytitan import __version__
from tinytitan.cli.app import app
from tinytitan.cli.examples import EXAMPLES, example_lines
from tinytitan.cli.polish import help_option, walk

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
COMMANDS = [path for path, _ in walk(typer.main.get_command(app))]


def _command(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(app)
    for word in path:
        command = command.commands[word]
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "tinytitan")
def test_help_shows_no_python_types(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert not re.search(r"<(str|int|float|bool|path|list\[[a-z]+\])>", result.output), result.output


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "tinytitan")
def test_flags_show_no_value_and_options_a_conventional_one(path: tuple[str, ...]) -> None:
    command = _command(path)
    for param in [*command.params, help_option(command)]:
        if getattr(param, "is_flag", False):
            assert param.metavar == "", param.opts
        else:
            assert param.metavar and re.fullmatch(r"[A-Za-z0-9_.|,/-]+", param.metavar), (param.opts, param.metavar)


def test_a_flag_pair_reads_as_two_flags() -> None:
    output = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    line = next(row for row in output.splitlines() if "--no-memory" in row)
    assert re.search(r"--memory\s+--no-memory\s+Agent memory", line), line


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "tinytitan")
def test_every_command_has_examples_in_its_help(path: tuple[str, ...]) -> None:
    assert path in EXAMPLES, f"add examples for '{' '.join(path)}' to tinytitan/cli/examples.py"
    output = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
    assert "Examples:" in output
    for line in example_lines(path):
        assert line in output


def _argv(line: str) -> list[str]:
    """The tinytitan arguments of an example line: after a pipe, without redirections or VAR=value."""
    words = shlex.split(line.split("|")[-1])
    words = [w for i, w in enumerate(words) if w not in ("<", ">") and (i == 0 or words[i - 1] not in ("<", ">"))]
    while "=" in words[0]:
        words.pop(0)
    assert words[0] == "tinytitan", line
    return words[1:]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "tinytitan")
def test_every_example_parses(path: tuple[str, ...]) -> None:
    """Each example's words name real commands, options and values (parsed by the app, not run)."""
    for line in example_lines(path):
        command: Any = typer.main.get_command(app)
        words = _argv(line)
        while getattr(command, "commands", None) and words and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        try:
            context = command.make_context(command.name, words)
        except Exception as exc:  # --help prints and exits (0); a bad word is a usage error (2)
            assert getattr(exc, "exit_code", None) == 0, f"{line}: {exc}"
            continue
        assert not context.args and not getattr(context, "_protected_args", []), f"{line}: {context.args}"


def test_version_names_tinytitan_mlx_mlx_lm_and_the_engine() -> None:
    lines = runner.invoke(app, ["--version"]).output.splitlines()
    assert lines[0] == f"tinytitan {__version__}"
    assert lines[1].startswith(f"mlx {metadata.version('mlx')}")
    assert lines[2] == f"mlx-lm {metadata.version('mlx-lm')}"
    assert lines[3].startswith("engine: mlx on ")
    assert lines[4].startswith("python ")


def test_version_and_help_do_not_import_mlx() -> None:
    program = (
        "import sys\n"
        "from tinytitan.cli.app import app\n"
        "for argv in (['--version'], ['--help'], ['serve', '--help']):\n"
        "    try:\n"
        "        app(argv, prog_name='tinytitan')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('mlx', 'mlx_lm', 'litestar', 'transformers', 'numpy', 'threadpoolctl')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # a shell's process, before any re-exec
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert "mlx" in done.stdout  # the version text ran
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_version_is_one_number_everywhere() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
    assert f"\n## [{__version__}] - " in (ROOT / "CHANGELOG.md").read_text()
