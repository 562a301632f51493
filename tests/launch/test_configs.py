"""The files ``tinytitan launch`` writes: merged into what the user has, never clobbering it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tinytitan.launch.configs import CODEX_CATALOG, codex_catalog, merge_json_file
from tinytitan.launch.server import LaunchError, Served

SERVED = Served("http://127.0.0.1:9", "stub-model", 32768, 8192, None, ("off", "on"))


def test_merge_keeps_every_other_key(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "models.json"
    path.parent.mkdir()
    mine: dict[str, Any] = {
        "providers": {"other": {"baseUrl": "https://example.invalid/v1", "models": [{"id": "x"}]}},
        "extra": [1, 2],
    }
    path.write_text(json.dumps(mine), encoding="utf-8")
    os.chmod(path, 0o640)

    merge_json_file(path, ("providers", "tinytitan"), {"baseUrl": "http://127.0.0.1:9/v1"})
    merge_json_file(path, ("providers", "tinytitan"), {"baseUrl": "http://127.0.0.1:10/v1"})  # replaced, not added

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == {**mine, "providers": {**mine["providers"], "tinytitan": {"baseUrl": "http://127.0.0.1:10/v1"}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the user's mode is kept
    assert sorted(p.name for p in path.parent.iterdir()) == ["models.json"]  # no temporary file left


def test_merge_creates_a_missing_file_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "models.json"
    merge_json_file(path, ("providers", "tinytitan"), {"api": "openai-completions"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"providers": {"tinytitan": {"api": "openai-completions"}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_merge_refuses_a_file_it_cannot_read_and_leaves_it_alone(tmp_path: Path, text: str) -> None:
    path = tmp_path / "models.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LaunchError, match="fix or move it"):
        merge_json_file(path, ("providers", "tinytitan"), {})
    assert path.read_text(encoding="utf-8") == text


def _fake_codex(tmp_path: Path, catalog: object) -> str:
    """A stand-in ``codex`` whose ``debug models`` prints ``catalog``."""
    script = tmp_path / "codex"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(catalog)}\nEOF\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def test_codex_catalog_has_the_window_and_codex_own_instructions(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    binary = _fake_codex(
        tmp_path,
        {
            "models": [
                {"slug": "hidden", "visibility": "hide", "base_instructions": "no"},
                {"slug": "gpt-y", "visibility": "list", "base_instructions": "You are Codex, at length."},
                {"slug": "gpt-x", "visibility": "list", "base_instructions": "You are Codex."},
            ]
        },
    )
    path = codex_catalog(home, SERVED, 24576, binary, {"PATH": os.environ["PATH"]})
    assert path == home / CODEX_CATALOG
    (entry,) = json.loads(path.read_text(encoding="utf-8"))["models"]
    assert entry["slug"] == "stub-model"
    assert entry["context_window"] == 32768 and entry["auto_compact_token_limit"] == 24576
    assert entry["base_instructions"] == "You are Codex."


def test_codex_catalog_keeps_the_users_own_catalog_entries(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    theirs = {"models": [{"slug": "their-model", "context_window": 1000}, {"slug": "stub-model", "context_window": 5}]}
    (home / "mine.json").write_text(json.dumps(theirs), encoding="utf-8")
    config = 'model = "their-model"\nmodel_catalog_json = "mine.json"\n'
    (home / "config.toml").write_text(config, encoding="utf-8")

    path = codex_catalog(home, SERVED, 24576, _fake_codex(tmp_path, {"models": [{"base_instructions": "I"}]}), {})
    assert path is not None
    models = json.loads(path.read_text(encoding="utf-8"))["models"]
    assert [(m["slug"], m["context_window"]) for m in models] == [("stub-model", 32768), ("their-model", 1000)]
    assert (home / "config.toml").read_text(encoding="utf-8") == config  # never edited
    assert json.loads((home / "mine.json").read_text(encoding="utf-8")) == theirs


def test_no_catalog_when_codex_gives_no_instructions(tmp_path: Path) -> None:
    assert codex_catalog(tmp_path, SERVED, 1, _fake_codex(tmp_path, "not a catalog"), {}) is None
    assert not (tmp_path / CODEX_CATALOG).exists()


def test_codex_catalog_gives_freeform_apply_patch_where_the_model_takes_it_and_code_mode_when_asked(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from tinytitan.launch.configs import codex_entry

    plain = codex_entry(SERVED, 1, "I")
    assert "apply_patch_tool_type" not in plain and "tool_mode" not in plain  # Codex's own default: a function
    freeform = replace(SERVED, freeform_tools=True)
    assert codex_entry(freeform, 1, "I")["apply_patch_tool_type"] == "freeform"
    path = codex_catalog(tmp_path, freeform, 1, _fake_codex(tmp_path, {"models": [{"base_instructions": "I"}]}), {},
                         code_mode=True)  # fmt: skip
    assert path is not None
    (entry,) = json.loads(path.read_text(encoding="utf-8"))["models"]
    assert (entry["apply_patch_tool_type"], entry["tool_mode"]) == ("freeform", "code_mode_only")


def test_the_servers_own_entry_with_codex_instructions_only_where_they_fit(tmp_path: Path) -> None:
    """A TinyTitan server publishes the model's Codex entry (``/v1/models``' ``models``): the launch
    writes it, with its window and compaction limit; Codex's own instructions replace the server's
    short ones only where they take at most an eighth of the window (issue 39.4/5)."""
    from dataclasses import replace

    ours = {"slug": "stub-model", "base_instructions": "short", "shell_type": "shell_command", "context_window": 1}
    small = replace(SERVED, codex=ours)  # 32,768 tokens: at most 4,096 tokens of instructions
    long_text = "x" * (4 * 4096 + 4)
    path = codex_catalog(
        tmp_path, small, 24576, _fake_codex(tmp_path, {"models": [{"base_instructions": long_text}]}), {}
    )
    assert path is not None
    (entry,) = json.loads(path.read_text(encoding="utf-8"))["models"]
    assert entry == {**ours, "context_window": 32768, "auto_compact_token_limit": 24576}
    codex = _fake_codex(tmp_path, {"models": [{"base_instructions": "You are Codex."}]})
    codex_catalog(tmp_path, small, 24576, codex, {}, code_mode=True)
    (entry,) = json.loads(path.read_text(encoding="utf-8"))["models"]
    assert (entry["base_instructions"], entry["tool_mode"]) == ("You are Codex.", "code_mode_only")
    # no instructions from Codex at all: the server's entry still stands
    assert codex_catalog(tmp_path, small, 24576, _fake_codex(tmp_path, "not a catalog"), {}) == path


def test_codex_catalog_says_a_vision_model_takes_images() -> None:
    """Issue 41: Codex attaches pictures (``-i``, pasted screenshots) only for a model whose catalog
    entry lists "image" among its input modalities."""
    from dataclasses import replace

    from tinytitan.launch.configs import codex_entry

    assert codex_entry(SERVED, 1, "I")["input_modalities"] == ["text"]
    assert codex_entry(replace(SERVED, images=True), 1, "I")["input_modalities"] == ["text", "image"]
