"""``tinytitan compact``: a saved session compacted offline with the server's own code."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tinytitan.cli.app import app
from tinytitan.engine.passes.compaction import HANDOVER_ASK
from tinytitan.testing.images import data_url, picture

NOTE = "Next step:\n- run the migration in db/001.sql"
RESPONSES = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Add a users table."}]},
    {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": '{"cmd": "ls db"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "001.sql"},
]
CHAT = [
    {"role": "system", "content": "guide"},
    {"role": "user", "content": "Add a users table."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "001.sql"},
]
MESSAGES = {
    "model": "m",
    "max_tokens": 100,
    "system": "guide",
    "messages": [
        {"role": "user", "content": "Add a users table."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "exec", "input": {"cmd": "ls"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "001.sql"}]},
    ],
}


def _files(tmp_path: Path, session: Any) -> tuple[Path, Path]:
    script = tmp_path / "stub.json"
    script.write_text(
        json.dumps(
            {
                "model": "stub-model",
                "context_window": 8192,
                "rules": [{"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}}],
            }
        )
    )
    path = tmp_path / "session.json"
    path.write_text(session if isinstance(session, str) else json.dumps(session))
    return path, script


@pytest.mark.parametrize(
    "session",
    [RESPONSES, {"input": RESPONSES}, CHAT, {"messages": CHAT}, MESSAGES],
    ids=["responses items", "responses body", "chat messages", "chat body", "messages body"],
)
def test_compact_prints_the_note(tmp_path: Path, session: Any, caplog: pytest.LogCaptureFixture) -> None:
    path, script = _files(tmp_path, session)
    caplog.set_level(logging.INFO, logger="tinytitan")
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NOTE
    assert "compaction pass 1" in result.stderr
    # the summary in words, counted right: no "(model)" mode name, no "1 passes" (in the log either)
    assert "written by the model; 1 pass wrote" in result.stderr and "done: model," not in result.stderr
    assert "1 pass)" in caplog.text and "1 passes" not in caplog.text


def test_a_messages_session_that_ends_with_the_reply_compacts(tmp_path: Path) -> None:
    """Issue 40.4: a saved Messages session normally ends with the assistant's reply, which the
    Messages mapper refused as a prefill; a session is compacted with it."""
    reply = {"role": "assistant", "content": [{"type": "text", "text": "The table is in db/001.sql."}]}
    messages: list[Any] = [*MESSAGES["messages"], reply]  # type: ignore[misc]
    path, script = _files(tmp_path, {**MESSAGES, "messages": messages})
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NOTE


def test_compact_json_is_the_endpoint_object(tmp_path: Path) -> None:
    path, script = _files(tmp_path, RESPONSES)
    result = CliRunner().invoke(
        app,
        [
            "compact",
            str(path),
            "--stub",
            str(script),
            "--json",
            "--instructions",
            "Hi",
            "--max-tokens",
            "300",
        ],
    )
    assert result.exit_code == 0, result.output
    obj = json.loads(result.stdout)
    assert obj["object"] == "response.compaction" and obj["output"][0]["content"][0]["text"] == "Hi"
    payload = json.loads(base64.b64decode(obj["output"][1]["encrypted_content"]))
    assert payload["summary"] == NOTE and payload["mode"] == "model"


@pytest.mark.parametrize(
    "session",
    ['{"input": [', "42", '{"something": 1}', '[{"type": "compaction", "encrypted_content": "@@"}]'],
    ids=["broken json", "a number", "no input", "a broken payload"],
)
def test_corrupt_session_is_a_clear_error(tmp_path: Path, session: str) -> None:
    path, script = _files(tmp_path, session)
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)])
    assert result.exit_code == 2, result.output
    assert "tinytitan compact:" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("budget", ["0", "-5"])
def test_a_budget_below_one_names_the_flag(tmp_path: Path, budget: str) -> None:
    path, script = _files(tmp_path, RESPONSES)
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script), "--max-tokens", budget])
    assert result.exit_code == 2 and "max_compaction_tokens" not in result.output
    assert (
        result.stderr.strip()
        == f"tinytitan compact: --max-tokens is the note's budget in tokens, at least 1 (not {budget})"
    )


def test_a_missing_session_is_a_clear_error(tmp_path: Path) -> None:
    _path, script = _files(tmp_path, RESPONSES)
    result = CliRunner().invoke(app, ["compact", str(tmp_path / "missing.json"), "--stub", str(script)])
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_compact_never_runs_memory(tmp_path: Path) -> None:
    """Issue 28.1: with memory switched on in the environment, the compaction passes still get no
    memory — the note is the handover pass's own, and no journal is written anywhere."""
    path, script = _files(tmp_path, RESPONSES)
    memory_call = {"name": "memory_set", "arguments": {"key": "project/build", "value": "make -j4"}}
    rules = [
        {"when": {"last_tool": "memory_set"}, "reply": {"text": "Saved and read back."}},
        {"when": {"user_contains": HANDOVER_ASK, "has_tools": True}, "reply": {"tool_calls": [memory_call]}},
        {"when": {"user_contains": HANDOVER_ASK}, "reply": {"text": NOTE}},
    ]
    script.write_text(json.dumps({"model": "stub-model", "context_window": 8192, "rules": rules}))
    env = {"TINYTITAN_MEMORY": "1", "TINYTITAN_MEMORY_DIR": str(tmp_path / "memory")}
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NOTE
    assert not (tmp_path / "memory").exists()


IMAGE_URL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}


@pytest.mark.parametrize(
    "session",
    [
        [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE_URL]}],
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE_URL]}]},
        {
            "model": "m",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE_BLOCK]}],
        },
        [{"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE_BLOCK]}],
    ],
    ids=["chat messages", "chat body", "messages body", "messages array"],
)
def test_an_image_is_kept_as_a_stated_placeholder_for_a_text_only_model(tmp_path: Path, session: Any) -> None:
    """Issue 41.5: a text-only model compacts a session with images, each one a stated placeholder
    where it was (the model is told an image was there and that it cannot see it), never refused."""
    path, script = _files(tmp_path, session)
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NOTE


def test_a_vision_model_compacts_with_the_images_themselves(tmp_path: Path) -> None:
    """Issue 41.5: a vision model's compaction pass is shown the session's images (the rule matches
    only a request holding the one picture)."""
    image = {"type": "image_url", "image_url": {"url": data_url(picture())}}
    path, script = _files(tmp_path, [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}])
    rules = [{"when": {"user_contains": HANDOVER_ASK, "images": 1}, "reply": {"text": NOTE}}]
    script.write_text(json.dumps({"model": "stub-model", "vision": True, "context_window": 8192, "rules": rules}))
    result = CliRunner().invoke(app, ["compact", str(path), "--stub", str(script)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == NOTE
