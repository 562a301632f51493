"""Each agent's wiring: the flags and variables it gets, and what it keeps of the user's own."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tinytitan.launch.agents import AGENTS, KEY_VARIABLE, LOOP_GUARD, compact_limit
from tinytitan.launch.server import Served

SMALL = Served("http://127.0.0.1:9", "m", 32768, 8192, "secret", ("off", "on"))
LARGE = Served("http://127.0.0.1:9", "m", 131072, 32000, None, ())


def test_claude_gets_model_url_key_window_and_cap_by_environment_and_settings(tmp_path: Path) -> None:
    user = {"ANTHROPIC_API_KEY": "sk-ant-real", "CLAUDE_CONFIG_DIR": str(tmp_path), "KEEP": "1"}
    wiring = AGENTS["claude"].wire("claude", SMALL, user, ["-p", "hi"])
    settings = tmp_path / f"tinytitan-launch-{os.getpid()}.json"
    assert wiring.argv == ["--settings", str(settings), "-p", "hi"] and wiring.session_files == (settings,)
    env = wiring.env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9" and env["ANTHROPIC_AUTH_TOKEN"] == "secret"
    assert "ANTHROPIC_API_KEY" not in env  # a real Anthropic key never reaches the local server
    for name in ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"):
        assert env[name] == "m"
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "32768" and env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "8192"
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in env  # Claude Code raises anything below 100k to that
    assert env["KEEP"] == "1"
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "x-tinytitan-loop-guard: on"  # the cap handed over is for planning
    assert env["ENABLE_TOOL_SEARCH"] == "true"  # the server runs tool search for a model that calls tools
    # the same variables in the --settings file (a user's settings.json `env` would override the process's)
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written == {"model": "m", "env": {k: v for k, v in env.items() if k not in user}}
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # it holds the key
    large = AGENTS["claude"].wire("claude", LARGE, {"HOME": str(tmp_path)}, []).env
    assert large["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "131072" and large["ANTHROPIC_AUTH_TOKEN"] == "unused"
    assert (tmp_path / ".claude" / settings.name).exists()


def test_codex_gets_provider_window_and_compaction_limit_by_flags(tmp_path: Path) -> None:
    binary = tmp_path / "codex"
    binary.write_text('#!/bin/sh\necho \'{"models": [{"base_instructions": "I"}]}\'\n', encoding="utf-8")
    binary.chmod(0o755)
    wiring = AGENTS["codex"].wire(str(binary), SMALL, {"CODEX_HOME": str(tmp_path / "ch")}, ["exec", "hi"])
    assert wiring.argv[-2:] == ["exec", "hi"] and set(wiring.argv[:-2:2]) == {"-c"}
    overrides = dict(o.split("=", 1) for o in wiring.argv[1:-2:2])
    assert overrides["model"] == '"m"' and overrides["model_provider"] == '"tinytitan"'
    assert 'base_url="http://127.0.0.1:9/v1"' in overrides["model_providers.tinytitan"]
    assert f'env_key="{KEY_VARIABLE}"' in overrides["model_providers.tinytitan"]
    assert overrides["model_context_window"] == "32768"
    assert overrides["model_auto_compact_token_limit"] == str(compact_limit(SMALL)) == "24576"
    assert overrides["model_catalog_json"] == json.dumps(str(tmp_path / "ch" / "tinytitan-models.json"))
    assert 'http_headers={"x-tinytitan-loop-guard"="on"}' in overrides["model_providers.tinytitan"]
    # the WebSocket transport, and in-band compaction (Codex runs it for a provider named "OpenAI")
    assert "supports_websockets=true" in overrides["model_providers.tinytitan"]
    assert 'name="OpenAI"' in overrides["model_providers.tinytitan"]
    assert wiring.env[KEY_VARIABLE] == "secret"


def test_pi_model_entry_merged_into_its_models_json(tmp_path: Path) -> None:
    directory = tmp_path / "pi"
    directory.mkdir()
    (directory / "models.json").write_text(json.dumps({"providers": {"other": {"models": []}}}), encoding="utf-8")
    wiring = AGENTS["pi"].wire("pi", SMALL, {"PI_CODING_AGENT_DIR": str(directory)}, ["-p", "hi"])
    assert wiring.argv == ["--provider", "tinytitan", "--model", "m", "-p", "hi"]
    providers = json.loads((directory / "models.json").read_text(encoding="utf-8"))["providers"]
    assert providers["other"] == {"models": []}
    ours = providers["tinytitan"]
    assert ours["baseUrl"] == "http://127.0.0.1:9/v1" and ours["apiKey"] == KEY_VARIABLE  # no key in the file
    (model,) = ours["models"]
    assert (model["id"], model["contextWindow"], model["maxTokens"], model["reasoning"]) == ("m", 32768, 8192, True)
    assert model["name"] == "m (TinyTitan at http://127.0.0.1:9)"  # the entry stays: it says which server
    assert ours["headers"] == LOOP_GUARD
    assert wiring.env[KEY_VARIABLE] == "secret"


def test_opencode_config_content_keeps_the_users_inline_config() -> None:
    user = {"OPENCODE_CONFIG_CONTENT": json.dumps({"theme": "x", "provider": {"other": {"name": "o"}}})}
    wiring = AGENTS["opencode"].wire("opencode", LARGE, user, ["run", "hi"])
    assert wiring.argv == ["run", "hi"]
    config = json.loads(wiring.env["OPENCODE_CONFIG_CONTENT"])
    assert config["theme"] == "x" and config["provider"]["other"] == {"name": "o"}
    assert config["model"] == "tinytitan/m"
    provider = config["provider"]["tinytitan"]
    assert provider["options"] == {
        "baseURL": "http://127.0.0.1:9/v1",
        "apiKey": "{env:TINYTITAN_LAUNCH_KEY}",
        "headers": LOOP_GUARD,
    }
    assert provider["models"]["m"]["limit"] == {"context": 131072, "output": 32000}
    assert provider["models"]["m"]["reasoning"] is False
    assert wiring.env[KEY_VARIABLE] == "unused"


def test_claude_keeps_the_users_own_custom_headers(tmp_path: Path) -> None:
    user = {"CLAUDE_CONFIG_DIR": str(tmp_path), "ANTHROPIC_CUSTOM_HEADERS": "X-Team: a\nx-tinytitan-loop-guard: off"}
    env = AGENTS["claude"].wire("claude", SMALL, user, []).env
    assert env["ANTHROPIC_CUSTOM_HEADERS"] == "X-Team: a\nx-tinytitan-loop-guard: on"


def test_codex_code_mode_needs_a_model_that_takes_freeform_tools(tmp_path: Path) -> None:
    from dataclasses import replace

    import pytest

    from tinytitan.launch.server import LaunchError

    binary = tmp_path / "codex"
    binary.write_text('#!/bin/sh\necho \'{"models": [{"base_instructions": "I"}]}\'\n', encoding="utf-8")
    binary.chmod(0o755)
    environ = {"CODEX_HOME": str(tmp_path / "ch")}
    with pytest.raises(LaunchError, match="--code-mode"):
        AGENTS["codex"].wire(str(binary), SMALL, environ, [], code_mode=True)
    AGENTS["codex"].wire(str(binary), replace(SMALL, freeform_tools=True), environ, [], code_mode=True)
    (entry,) = json.loads((tmp_path / "ch" / "tinytitan-models.json").read_text(encoding="utf-8"))["models"]
    assert entry["tool_mode"] == "code_mode_only" and entry["apply_patch_tool_type"] == "freeform"
    assert AGENTS["codex"].choices == {"code_mode"} and not AGENTS["claude"].choices


def test_claude_searches_tools_only_with_a_model_that_calls_them(tmp_path: Path) -> None:
    from dataclasses import replace

    no_tools = replace(SMALL, tool_calls=False)
    assert "ENABLE_TOOL_SEARCH" not in AGENTS["claude"].wire("claude", no_tools, {"HOME": str(tmp_path)}, []).env
