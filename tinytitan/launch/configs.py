"""The files ``tinytitan launch`` writes, always inside an agent's own config directory.

- ``merge_json_file``: set one entry of a JSON config (pi's ``models.json`` provider) and keep every
  other key the user has there; a file that is not JSON is refused, never overwritten.
- ``codex_catalog``: Codex's model catalog for the served model (``tinytitan-models.json`` beside its
  ``config.toml``, passed with ``-c model_catalog_json=…``), holding the entries of a catalog the user
  already configured too. The entry is the server's own (``GET /v1/models``' ``models``, Codex's
  ``ModelInfo``) where it publishes one; its short instructions give way to the installed Codex's own
  (``codex debug models``, the shortest of its listed models') where those take at most an eighth of
  the window, so Codex prompts a large model as it prompts its own. A model whose
  calls can hold a tool's input to a grammar gets Codex's freeform ``apply_patch``
  (``apply_patch_tool_type: "freeform"``), and Code Mode (``tool_mode: "code_mode_only"``: one freeform
  ``exec`` tool taking JavaScript) when the launch asks for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tinytitan.launch.server import LaunchError, Served

__all__ = ["CODEX_CATALOG", "codex_catalog", "codex_entry", "merge_json_file", "write_json"]

CODEX_CATALOG = "tinytitan-models.json"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LaunchError(f"cannot read {path} ({exc}); fix or move it and launch again") from None


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` whole or not at all (a temporary file renamed over it), keeping the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, name = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, ensure_ascii=False)
            out.write("\n")
        os.chmod(name, mode)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def merge_json_file(path: Path, keys: Sequence[str], value: Any) -> None:
    """Set ``keys`` (a path of object keys) to ``value`` in the JSON file at ``path``, keeping the rest."""
    data = _read_json(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LaunchError(f"{path} does not hold a JSON object; fix or move it and launch again")
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
    write_json(path, data)


def _instructions(binary: str, environ: Mapping[str, str]) -> str | None:
    """The shortest base instructions among the installed Codex's listed models (the least prompt to
    read on every turn), or None when it gives none."""
    try:
        done = subprocess.run(
            [binary, "debug", "models"],
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
        models = json.loads(done.stdout).get("models") or []
    except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
        return None
    texts = [
        text
        for model in models
        if isinstance(model, dict)
        and model.get("visibility", "list") == "list"
        and isinstance(text := model.get("base_instructions"), str)
        and text
    ]
    return min(texts, key=len, default=None)


_CHARS_PER_TOKEN = 4
_INSTRUCTIONS_SHARE = 1 / 8  # the most of the window Codex's own instructions may take


def codex_entry(served: Served, compact_limit: int, instructions: str, *, code_mode: bool = False) -> dict[str, Any]:
    """A Codex catalog entry for the served model (the fields Codex requires, the window, and its
    freeform tools: ``apply_patch`` as a custom tool where the model's call syntax can carry one, and
    Code Mode when asked)."""
    tools: dict[str, Any] = {"apply_patch_tool_type": "freeform"} if served.freeform_tools else {}
    if code_mode:
        tools["tool_mode"] = "code_mode_only"
    return {
        "slug": served.model,
        "display_name": served.model,
        "description": "Served by TinyTitan",
        "context_window": served.context_window,
        "auto_compact_token_limit": compact_limit,
        "base_instructions": instructions,
        "supported_reasoning_levels": [],
        "shell_type": "shell_command",
        "visibility": "list",
        "supported_in_api": True,
        "priority": 0,
        "support_verbosity": False,
        "supports_parallel_tool_calls": False,
        "supports_reasoning_summaries": False,
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "input_modalities": ["text", "image"] if served.images else ["text"],
        "experimental_supported_tools": [],
        **tools,
    }


def _user_catalog(home: Path, ours: Path) -> list[dict[str, Any]]:
    """The entries of the catalog the user's ``config.toml`` names (not ours), if it names one."""
    try:
        config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    named = config.get("model_catalog_json")
    if not isinstance(named, str):
        return []
    path = Path(named).expanduser()
    path = path if path.is_absolute() else home / path
    if path.resolve() == ours.resolve():
        return []
    data = _read_json(path)
    models = data.get("models") if isinstance(data, dict) else None
    return [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []


def codex_catalog(
    home: Path,
    served: Served,
    compact_limit: int,
    binary: str,
    environ: Mapping[str, str],
    *,
    code_mode: bool = False,
) -> Path | None:
    """Write ``home/tinytitan-models.json`` for the served model: the server's own catalog entry when it
    publishes one (``/v1/models``' ``models``), else one built here; None when there is neither that
    nor instructions from Codex. Codex's own instructions replace the server's short ones where they
    take at most an eighth of the window (on a small window they would leave no room to work)."""
    instructions = _instructions(binary, environ)
    if served.codex is not None:
        entry = served_entry(served, compact_limit, instructions, code_mode=code_mode)
    elif instructions is not None:
        entry = codex_entry(served, compact_limit, instructions, code_mode=code_mode)
    else:
        return None
    path = home / CODEX_CATALOG
    theirs = [m for m in _user_catalog(home, path) if m.get("slug") != served.model]
    write_json(path, {"models": [entry, *theirs]})
    return path


def served_entry(
    served: Served, compact_limit: int, instructions: str | None, *, code_mode: bool = False
) -> dict[str, Any]:
    """The server's catalog entry with the launch's window and compaction limit, Code Mode when asked,
    and Codex's own instructions where they fit (about four characters a token)."""
    entry = {
        **(served.codex or {}),
        "context_window": served.context_window,
        "auto_compact_token_limit": compact_limit,
    }
    if instructions and len(instructions) / _CHARS_PER_TOKEN <= served.context_window * _INSTRUCTIONS_SHARE:
        entry["base_instructions"] = instructions
    if code_mode:
        entry["tool_mode"] = "code_mode_only"
    return entry
