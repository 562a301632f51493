"""The served models as Codex's model discovery decodes them (issue 39.3).

Codex reads a provider's ``GET /models`` (and a ``model_catalog_json`` file) as ``{"models":
[ModelInfo, …]}`` — codex-rs ``protocol/src/openai_models.rs``: the fields it requires (``slug``,
``display_name``, ``supported_reasoning_levels``, ``shell_type``, ``visibility``, ``supported_in_api``,
``priority``, ``base_instructions``, ``supports_reasoning_summaries``, ``support_verbosity``,
``truncation_policy``, ``supports_parallel_tool_calls``, ``experimental_supported_tools``) and those
it plans with (``context_window``, ``auto_compact_token_limit``, ``apply_patch_tool_type``,
``input_modalities``, ``default_reasoning_level``, ``supports_search_tool`` — without it Codex sends
every MCP tool in every prompt instead of its ``tool_search``). ``GET /v1/models`` carries this list beside
OpenAI's ``data``, so one answer serves an OpenAI SDK and Codex alike.

``base_instructions`` are short on purpose: they are read on every turn, and a local model's window
is small (the instructions of Codex's own models run to 17,000 characters and more).
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.request import ModelInfo
from tinytitan.engine.request.limits import planning_cap

__all__ = ["BASE_INSTRUCTIONS", "codex_model", "compaction_limit", "effort_of", "modalities"]

BASE_INSTRUCTIONS = (
    "You are a coding agent working in the user's repository through the tools you are given. Read files "
    "and run commands with the shell tool; change files with apply_patch; keep the user's code style. "
    "Do the task step by step, check your work by running it where you can, and end with a short answer "
    "that says what you changed."
)
# a ladder level as Codex's effort enum spells it (none, minimal, low, medium, high, xhigh)
_EFFORTS = {
    "off": "none",
    "on": "medium",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}


def effort_of(level: str | None) -> str | None:
    """Codex's effort word for a reasoning level of the model (None for none)."""
    return _EFFORTS.get(level) if level is not None else None


def compaction_limit(window: int) -> int:
    """Where a client should compact: one planned answer below the window (at least half of it)."""
    return max(window - planning_cap(window), window // 2)


def codex_model(model_id: str, info: ModelInfo) -> dict[str, Any]:
    """``model_id`` as one Codex ``ModelInfo``."""
    efforts: list[str] = []
    for level in info.reasoning_levels:
        effort = effort_of(level)
        if effort is not None and effort not in efforts:
            efforts.append(effort)
    entry: dict[str, Any] = {
        "slug": model_id,
        "display_name": model_id,
        "description": "Served by TinyTitan",
        "supported_reasoning_levels": [{"effort": effort, "description": f"reasoning: {effort}"} for effort in efforts],
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": True,
        "priority": 0,
        "upgrade": None,
        "base_instructions": BASE_INSTRUCTIONS,
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        # freeform: apply_patch as a custom tool whose patch is held to Codex's grammar (issue 38)
        "apply_patch_tool_type": "freeform" if info.freeform_grammars else "function",
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_parallel_tool_calls": info.tool_calls,
        # Codex offers its tool_search (deferred MCP tools, issue 39) only to a model that says so
        "supports_search_tool": info.tool_calls,
        "context_window": info.context_window,
        "auto_compact_token_limit": compaction_limit(info.context_window),
        "max_output_tokens": planning_cap(info.context_window),
        "experimental_supported_tools": [],
        "input_modalities": modalities(info),
    }
    default = effort_of(info.default_reasoning) if info.reasoning_levels else None
    if default is not None and default in efforts:
        entry["default_reasoning_level"] = default
    return entry


def modalities(info: ModelInfo) -> list[str]:
    """What a model reads: text, and images for a vision model (every listing's ``input_modalities``)."""
    return ["text", "image"] if info.vision else ["text"]
