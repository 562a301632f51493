"""How each coding agent is wired to a served model: its command line, its environment, its config files.

``AGENTS[name].wire(binary, served, environ, args)`` returns the agent's ``Wiring``: the argv to run and the
environment to run it in. Everything goes by flags and environment where the agent takes it that
way; what only a file can say is written into the agent's own config directory, beside or merged
into what the user has there, never replacing it (see ``tinytitan.launch.configs``): Claude Code's
``--settings`` file (``tinytitan-launch-PID.json``, for the session only: the user's settings.json
``env`` would override the process environment), Codex's model catalog (``tinytitan-models.json``),
pi's ``models.json``.

The context facts each agent needs so it compacts before the server refuses a prompt:
- Claude Code: ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` (the window of a model id it does not know),
  ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (only from 100,000 tokens: it raises anything below to that)
  and ``CLAUDE_CODE_MAX_OUTPUT_TOKENS``.
- Codex: ``model_context_window``, ``model_auto_compact_token_limit`` and a model-catalog entry, so it
  knows the model instead of warning "Model metadata for … not found".
- pi and OpenCode: their model entry's ``contextWindow`` / ``maxTokens`` and ``limit.context`` /
  ``limit.output``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinytitan.launch.configs import codex_catalog, merge_json_file, write_json
from tinytitan.launch.server import LaunchError, Served

__all__ = ["AGENTS", "KEY_VARIABLE", "LOOP_GUARD", "PROVIDER", "Agent", "Wiring", "compact_limit"]

PROVIDER = "tinytitan"  # the provider / profile name every agent's config gets
CODEX_PROVIDER_NAME = "OpenAI"  # the name Codex compacts in band for (its remote compaction)
# sent with every request: the output cap the launch hands over is for the agent to plan compaction
# with, so the server's loop guard still watches each answer (``engine/loops.py``)
LOOP_GUARD = {"x-tinytitan-loop-guard": "on"}
KEY_VARIABLE = "TINYTITAN_LAUNCH_KEY"  # the variable agents read the key from (not TINYTITAN_API_KEY:
# the agent's own shell commands inherit it, and a `tinytitan serve` among them would then want a key)
_CLAUDE_MIN_COMPACT_WINDOW = 100_000


@dataclass(frozen=True, slots=True)
class Wiring:
    argv: list[str]  # the agent's arguments after its binary
    env: dict[str, str]  # the whole environment to run it in
    session_files: tuple[Path, ...] = ()  # written for this run only: removed once the agent exits


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    binary: str
    package: str  # the npm package that installs it
    wire: Callable[..., Wiring]  # (binary, served, environ, args, **choices)
    choices: frozenset[str] = frozenset()  # the launch's agent-only choices it takes (Codex: code_mode)

    @property
    def install_hint(self) -> str:
        return f"npm install -g {self.package}"


def compact_limit(served: Served) -> int:
    """Where an agent that takes a compaction threshold should compact: one answer below the window."""
    return max(served.context_window - served.output_cap, served.context_window // 2)


def _home(environ: Mapping[str, str], variable: str, *default: str) -> Path:
    """An agent's config directory: ``variable`` when set, else ``default`` under HOME."""
    return Path(environ.get(variable) or Path(environ.get("HOME") or Path.home()).joinpath(*default))


def _custom_headers(theirs: str | None) -> str:
    """``ANTHROPIC_CUSTOM_HEADERS`` ("Name: value" lines): the user's own, and the loop guard's."""
    ours = [f"{name}: {value}" for name, value in LOOP_GUARD.items()]
    kept = [
        line
        for line in (theirs or "").splitlines()
        if line.strip() and line.split(":")[0].strip().lower() not in LOOP_GUARD
    ]
    return "\n".join([*kept, *ours])


def _claude(binary: str, served: Served, environ: Mapping[str, str], args: Sequence[str]) -> Wiring:
    variables = dict.fromkeys(
        (
            "ANTHROPIC_MODEL",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL",  # its background calls
            "ANTHROPIC_DEFAULT_SONNET_MODEL",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "CLAUDE_CODE_SUBAGENT_MODEL",
        ),
        served.model,
    )
    variables.update(
        {
            "ANTHROPIC_BASE_URL": served.url,  # no /v1: Claude Code adds /v1/messages
            "ANTHROPIC_AUTH_TOKEN": served.key,  # a Bearer token: no "use this API key?" question
            "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(served.context_window),
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(served.output_cap),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no calls to outside hosts
            "ANTHROPIC_CUSTOM_HEADERS": _custom_headers(environ.get("ANTHROPIC_CUSTOM_HEADERS")),
        }
    )
    if served.tool_calls is not False:  # Claude Code searches deferred (MCP) tools only when told to
        variables["ENABLE_TOOL_SEARCH"] = "true"
    if served.context_window >= _CLAUDE_MIN_COMPACT_WINDOW:  # below, the window above bounds it anyway
        variables["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(served.context_window)
    # The `env` of the user's settings.json overrides the process environment; settings given with
    # --settings override the user's: the same variables go both ways (a file: the key stays off argv).
    settings = _home(environ, "CLAUDE_CONFIG_DIR", ".claude") / f"tinytitan-launch-{os.getpid()}.json"
    write_json(settings, {"model": served.model, "env": variables})
    env = {key: value for key, value in environ.items() if key != "ANTHROPIC_API_KEY"}  # the token wins
    return Wiring(["--settings", str(settings), *args], {**env, **variables}, (settings,))


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def _codex(
    binary: str, served: Served, environ: Mapping[str, str], args: Sequence[str], *, code_mode: bool = False
) -> Wiring:
    headers = ", ".join(f"{_toml(k)}={_toml(v)}" for k, v in LOOP_GUARD.items())
    # named "OpenAI": Codex compacts in band (a compaction_trigger item, one compaction item back) only
    # for a provider of that name; supports_websockets: the Responses WebSocket (a server started with
    # --no-websockets answers the upgrade with 426, and Codex falls back to HTTP)
    provider = (
        f"{{name={_toml(CODEX_PROVIDER_NAME)}, base_url={_toml(served.v1)}, env_key={_toml(KEY_VARIABLE)}, "
        f'wire_api="responses", supports_websockets=true, http_headers={{{headers}}}}}'
    )
    overrides = [
        f"model={_toml(served.model)}",
        f"model_provider={_toml(PROVIDER)}",
        f"model_providers.{PROVIDER}={provider}",
        f"model_context_window={served.context_window}",
        f"model_auto_compact_token_limit={compact_limit(served)}",
    ]
    if code_mode and not served.freeform_tools:
        raise LaunchError(
            f"Code Mode gives {served.model} one freeform exec tool held to a grammar, which its tool-call "
            "syntax cannot carry; launch without --code-mode, or serve a model whose syntax can "
            "(tinytitan models --details: freeform tools)"
        )
    home = _home(environ, "CODEX_HOME", ".codex")
    catalog = codex_catalog(home, served, compact_limit(served), binary, environ, code_mode=code_mode)
    if catalog is not None:
        overrides.append(f"model_catalog_json={_toml(str(catalog))}")
    argv = [word for override in overrides for word in ("-c", override)]
    return Wiring([*argv, *args], {**environ, KEY_VARIABLE: served.key})


def _reasoning(served: Served) -> bool:
    return any(level != "off" for level in served.reasoning_levels)


def _pi(binary: str, served: Served, environ: Mapping[str, str], args: Sequence[str]) -> Wiring:
    directory = _home(environ, "PI_CODING_AGENT_DIR", ".pi", "agent")
    model = {
        "id": served.model,
        "name": f"{served.model} (TinyTitan at {served.url})",  # the entry stays: it says which server
        "reasoning": _reasoning(served),
        "contextWindow": served.context_window,
        "maxTokens": served.output_cap,
    }
    provider = {
        "baseUrl": served.v1,
        "api": "openai-completions",
        "apiKey": KEY_VARIABLE,  # pi reads a variable by that name: no key in the file
        "headers": dict(LOOP_GUARD),
        "models": [model],
    }
    merge_json_file(directory / "models.json", ("providers", PROVIDER), provider)
    argv = ["--provider", PROVIDER, "--model", served.model, *args]
    return Wiring(argv, {**environ, KEY_VARIABLE: served.key})


def _opencode(binary: str, served: Served, environ: Mapping[str, str], args: Sequence[str]) -> Wiring:
    model = {
        "name": f"{served.model} (TinyTitan)",
        "reasoning": _reasoning(served),
        "tool_call": True,
        "limit": {"context": served.context_window, "output": served.output_cap},
    }
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "TinyTitan",
        "options": {"baseURL": served.v1, "apiKey": f"{{env:{KEY_VARIABLE}}}", "headers": dict(LOOP_GUARD)},
        "models": {served.model: model},
    }
    # OPENCODE_CONFIG_CONTENT is merged over the user's config files; a value of their own is kept
    config: dict[str, Any] = {}
    if environ.get("OPENCODE_CONFIG_CONTENT"):
        try:
            loaded = json.loads(environ["OPENCODE_CONFIG_CONTENT"])
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            config = loaded
    providers = config.get("provider")
    providers = providers if isinstance(providers, dict) else {}
    config = {**config, "model": f"{PROVIDER}/{served.model}", "provider": {**providers, PROVIDER: provider}}
    env = {**environ, KEY_VARIABLE: served.key, "OPENCODE_CONFIG_CONTENT": json.dumps(config)}
    return Wiring(list(args), env)


AGENTS: dict[str, Agent] = {
    agent.name: agent
    for agent in (
        Agent("claude", "claude", "@anthropic-ai/claude-code", _claude),
        Agent("codex", "codex", "@openai/codex", _codex, frozenset({"code_mode"})),
        Agent("pi", "pi", "@mariozechner/pi-coding-agent", _pi),
        Agent("opencode", "opencode", "opencode-ai", _opencode),
    )
}
