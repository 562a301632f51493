"""Shell completion: the committed scripts complete in real bash, zsh and fish, and match the CLI.

bash is always there; zsh and fish come from Debian (``.ci/run`` installs them): without them these
tests skip with a reason, except under ``CI=true`` where a missing shell is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.testing.missing import missing
from tinytitan.testing.terminal import spawn

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "completions"
runner = CliRunner()


def _shell(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    missing(f"{name} is not installed (apt-get install {name})")


@pytest.mark.parametrize(
    ("shell", "name"), [("bash", "tinytitan.bash"), ("zsh", "_tinytitan"), ("fish", "tinytitan.fish")]
)
def test_completion_command_prints_the_committed_script(shell: str, name: str) -> None:
    result = runner.invoke(app, ["completion", shell])
    assert result.exit_code == 0
    assert result.output == (SCRIPTS / name).read_text()


def test_completion_of_an_unknown_shell_is_a_usage_error() -> None:
    result = runner.invoke(app, ["completion", "tcsh"])
    assert result.exit_code == 2
    assert "no completion for 'tcsh': bash, zsh or fish" in result.output


# --- bash: readline itself, then the completion function word by word ---------------------------


def _interactive_bash(tmp_path: Path) -> Any:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TERM": "dumb",
        "INPUTRC": "/dev/null",
    }
    bash = spawn(_shell("bash"), ["--norc", "--noprofile", "-i"], env=env, cwd=tmp_path)
    bash.sendline(f"PS1='READY> '; bind 'set show-all-if-ambiguous on'; source {SCRIPTS / 'tinytitan.bash'}")
    bash.expect("READY> ")
    return bash


def test_bash_tab_completes_the_subcommand(tmp_path: Path) -> None:
    bash = _interactive_bash(tmp_path)
    try:
        bash.send("tinytitan se\t")
        bash.expect("serve ")  # the word completed, and a space after it: the only match
        bash.send("\x15")  # clear the line
        bash.sendline("echo done")
        bash.expect("done")
    finally:
        bash.close(force=True)


def test_bash_tab_lists_the_serve_options(tmp_path: Path) -> None:
    bash = _interactive_bash(tmp_path)
    try:
        bash.send("tinytitan serve --mo\t")
        bash.expect("--model-id")  # ambiguous: readline lists the candidates
        listing = bash.before + bash.after
        bash.expect("READY> ")
        assert "--model" in listing
        assert "--memory" not in listing and "--host" not in listing
    finally:
        bash.close(force=True)


def _complete(*words: str) -> list[str]:
    """COMPREPLY for the command line ``words`` (the last one is being completed), in a plain bash."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {SCRIPTS / 'tinytitan.bash'}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        '_tinytitan; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run([_shell("bash"), "--norc", "-c", program], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("tinytitan", "se"), ["serve"]),
        (("tinytitan", "c"), ["count-tokens", "compact", "chat", "completion"]),
        (("tinytitan", "serve", "--mo"), ["--model", "--model-id", "--models-dir"]),
        (("tinytitan", "models", "p"), ["pull"]),
        (("tinytitan", "models", "rm", "--"), ["--yes", "--cache-dir", "--help"]),
        (("tinytitan", "serve", "--memory-tools", ""), ["off", "minimal", "full"]),
        (("tinytitan", "serve", "--memory-tools", "=", "m"), ["minimal"]),  # --memory-tools=m
        (("tinytitan", "serve", "--port", "8097", "--thinking", "o"), ["on", "off"]),
        (("tinytitan", "chat", "--reasoning", "x"), ["xhigh"]),
        (("tinytitan", "count-tokens", "--api", ""), ["chat", "responses", "messages"]),
        (("tinytitan", "completion", "f"), ["fish"]),
        (("tinytitan", "--v"), ["--version"]),
        (("tinytitan", "serve", "--port", ""), []),  # free text: nothing to offer
    ],
)
def test_bash_completes(words: tuple[str, ...], expected: list[str]) -> None:
    assert _complete(*words) == expected


def test_bash_completes_files_for_file_arguments(tmp_path: Path) -> None:
    (tmp_path / "request.json").write_text("{}")
    assert _complete("tinytitan", "count-tokens", str(tmp_path / "req")) == [str(tmp_path / "request.json")]
    assert _complete("tinytitan", "serve", "--stub", str(tmp_path / "r")) == [str(tmp_path / "request.json")]


# --- zsh and fish ---------------------------------------------------------------------------------


def test_zsh_tab_completes_through_compinit(tmp_path: Path) -> None:
    functions = tmp_path / "zfunc"
    functions.mkdir()
    shutil.copy(SCRIPTS / "_tinytitan", functions / "_tinytitan")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "dumb"}
    zsh = spawn(_shell("zsh"), ["-f", "-i"], env=env, cwd=tmp_path)
    try:
        zsh.sendline(f"PS1='READY> '; fpath=({functions} $fpath); autoload -Uz compinit; compinit -u -D")
        zsh.expect("READY> ")
        zsh.send("tinytitan se\t")
        zsh.expect("serve")
        zsh.send("\x15tinytitan serve --memory-tools \t")
        zsh.expect("minimal")
    finally:
        zsh.close(force=True)


def _fish_complete(line: str) -> list[str]:
    program = f"source {SCRIPTS / 'tinytitan.fish'}; complete -C '{line}'"
    out = subprocess.run([_shell("fish"), "--no-config", "-c", program], capture_output=True, text=True, check=True)
    return [row.split("\t")[0] for row in out.stdout.splitlines()]


def test_fish_completes() -> None:
    assert _fish_complete("tinytitan se") == ["serve"]
    assert sorted(_fish_complete("tinytitan serve --mo")) == ["--model", "--model-id", "--models-dir"]
    assert _fish_complete("tinytitan models p") == ["pull"]
    assert sorted(_fish_complete("tinytitan serve --memory-tools ")) == ["full", "minimal", "off"]
    assert sorted(_fish_complete("tinytitan completion ")) == ["bash", "fish", "zsh"]
