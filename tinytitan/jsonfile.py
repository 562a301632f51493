"""Reading one JSON document from a file (or ``-``, standard input) with errors a user can act on."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["read_json"]


def read_json(source: str | Path, error: Callable[[str], Exception], what: str = "", empty: str = "") -> Any:
    """The document in ``source``; an unreadable file, an empty one or bad JSON raises ``error(message)``.

    ``what`` names the file's role in the message (``"stub script "``: "cannot read stub script x");
    ``empty``: what to do instead, said when there is nothing to read (stdin ended at once).
    """
    try:
        text = sys.stdin.read() if str(source) == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what}{source}: {exc.strerror or exc}") from None
    if not text.strip():
        name = "standard input" if str(source) == "-" else str(source)
        raise error(f"{what}{name} is empty" + (f"; {empty}" if empty else ""))
    try:
        return json.loads(text)
    except ValueError as exc:
        raise error(f"{what}{source} is not JSON: {exc}") from None
