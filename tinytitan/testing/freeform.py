"""Freeform (custom) tools for tests and benchmarks (issue 38): the grammars of ``grammars/`` (their
origins in ``grammars/SOURCES.md``) and the tools Codex sends with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["APPLY_PATCH", "GRAMMARS", "PATCH", "custom_tool", "grammar"]

GRAMMARS = Path(__file__).with_name("grammars")


def grammar(name: str) -> str:
    """The Lark source of ``grammars/<name>.lark`` (``codex_apply_patch``, ``codex_exec``, ``js_exec``)."""
    return (GRAMMARS / f"{name}.lark").read_text(encoding="utf-8")


def custom_tool(
    name: str, definition: str | None = None, *, syntax: str = "lark", chat: bool = False
) -> dict[str, Any]:
    """A custom tool in the Responses shape (``chat``: Chat Completions'); no ``definition``: free text."""
    fmt: dict[str, Any] = {"type": "text"}
    if definition is not None:
        fmt = {"type": "grammar", "syntax": syntax, "definition": definition}
        if chat:
            fmt = {"type": "grammar", "grammar": {"syntax": syntax, "definition": definition}}
    body = {"name": name, "description": f"The {name} tool.", "format": fmt}
    return {"type": "custom", "custom": body} if chat else {"type": "custom", **body}


APPLY_PATCH = custom_tool("apply_patch", grammar("codex_apply_patch"))

PATCH = (
    "*** Begin Patch\n"
    "*** Update File: src/app.py\n"
    "@@ def greet(name):\n"
    '-    print("hi " + name)\n'
    '+    print(f"hi {name}, \\"quoted\\" \\\\ path")\n'
    "+    return {'ok': True}\n"
    "*** Add File: notes.txt\n"
    "+line one\n"
    "*** End Patch\n"
)
"""A patch with newlines, quotes, backslashes and braces: what a freeform input must carry losslessly."""
