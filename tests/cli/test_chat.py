"""``tinytitan chat``: a terminal conversation over the engine, with history."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.testing.scripts import script


def test_two_turns_with_reasoning(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(
        json.dumps(
            script(
                {"when": {"user_contains": "again"}, "reply": {"text": "second answer"}},
                {"reply": {"reasoning": "pondering", "text": "first answer"}},
            )
        )
    )
    result = CliRunner().invoke(
        app, ["chat", "--stub", str(stub), "--system", "be nice"], input="hello\n\nagain please\n/exit\n"
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pondering" in out and "first answer" in out and "second answer" in out
    assert out.index("first answer") < out.index("second answer")
    assert "[stop;" in out


def test_errors_are_shown_and_the_session_goes_on(tmp_path: Path) -> None:
    stub = tmp_path / "stub.json"
    stub.write_text(json.dumps(script(context_window=64)))
    result = CliRunner().invoke(app, ["chat", "--stub", str(stub)], input="word " * 100 + "\nhi\n")
    assert result.exit_code == 0
    assert "error:" in result.output and "hello from tinytitan" in result.output
