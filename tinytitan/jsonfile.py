"""Reading one JSON document from a file (or ``-``, standard input) with errors a user can act on."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["read_json"]


def read_json(source: str | Path, error: Callable[[str], Exception], what: str = "") -> Any:
    """The document in ``source``; an unreadable file or bad JSON raises ``error(message)``.

    ``what`` names the file's role in the message (``"stub script "``: "cannot read stub script x").
    """
    try:
        text = sys.stdin.read() if str(source) == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what}{source}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise error(f"{what}{source} is not JSON: {exc}") from None
