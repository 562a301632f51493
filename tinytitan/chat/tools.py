"""Client-side tools the chat offers with ``--tools``: read a file, list a directory.

They run in the chat's process, on the user's machine, only after the user says yes to each call
(the UI asks). Both are read-only; relative paths are taken from the chat's working directory;
a file's text is capped so one call cannot fill the context.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_FILE_BYTES", "MAX_LISTING", "TOOLS", "Tool", "run_tool", "tool_specs"]

MAX_FILE_BYTES = 32 * 1024
MAX_LISTING = 200


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], str]

    def spec(self) -> dict[str, Any]:
        """The Responses ``tools`` entry."""
        return {"type": "function", "name": self.name, "description": self.description, "parameters": self.parameters}


def _path(args: dict[str, Any], key: str = "path") -> Path:
    value = args.get(key, ".")
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{key}' must be a non-empty string")
    return Path(value).expanduser()


def read_file(args: dict[str, Any]) -> str:
    path = _path(args)
    data = path.read_bytes()
    text = data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_FILE_BYTES:
        text += f"\n[… truncated: {len(data):,} bytes, the first {MAX_FILE_BYTES:,} shown]"
    return text


def list_directory(args: dict[str, Any]) -> str:
    path = _path(args)
    entries = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name.lower()))
    lines = [f"{e.name}/" if e.is_dir() else e.name for e in entries[:MAX_LISTING]]
    if len(entries) > MAX_LISTING:
        lines.append(f"[… {len(entries) - MAX_LISTING} more entries]")
    return "\n".join(lines) or "(empty directory)"


_PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "A path, absolute or relative to the working directory."}},
    "required": ["path"],
    "additionalProperties": False,
}

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("read_file", "Read a text file on the user's machine.", _PATH_SCHEMA, read_file),
        Tool("list_directory", "List the entries of a directory on the user's machine.", _PATH_SCHEMA, list_directory),
    )
}


def tool_specs() -> list[dict[str, Any]]:
    return [t.spec() for t in TOOLS.values()]


def run_tool(name: str, arguments: str) -> str:
    """The tool's output, or one line saying why it could not run (the model reads either)."""
    tool = TOOLS.get(name)
    if tool is None:
        return f"error: there is no tool named {name!r}; available: {', '.join(TOOLS)}"
    try:
        args = json.loads(arguments or "{}")
        if not isinstance(args, dict):
            raise ValueError("arguments must be a JSON object")
        return tool.run(args)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"error: {reason}"
