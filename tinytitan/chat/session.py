"""The conversation: Responses input items, resent whole each turn (``store: false``, as Codex does).

The history is exactly what a Responses client would send as ``input``: the user's messages and
the output items the server returned (reasoning, messages, function calls), plus the outputs of
the tools the chat ran. A saved session is the request body itself (``model``, ``instructions``,
``reasoning``, ``input``), so ``tinytitan compact FILE`` and ``tinytitan count-tokens FILE`` read
it as they read any saved Responses request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinytitan.jsonfile import read_json

__all__ = ["DEFAULT_MAX_TOKENS", "Session", "SessionFileError", "assistant_item", "user_item"]

DEFAULT_MAX_TOKENS = 2048  # the chat's output cap unless --max-tokens or /max-tokens says otherwise


class SessionFileError(ValueError):
    """A file /load cannot use; the message says why."""


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_item(text: str) -> dict[str, Any]:
    """An assistant message the chat writes itself (the visible part of an interrupted answer)."""
    return {
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


@dataclass
class Session:
    model: str
    instructions: str | None = None
    reasoning: str | None = None  # a ladder level, or None for the server's default
    max_output_tokens: int | None = None
    items: list[dict[str, Any]] = field(default_factory=list)

    def body(self, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The Responses request for the next turn (without ``stream``)."""
        body: dict[str, Any] = {"model": self.model, "input": list(self.items), "store": False}
        if self.instructions:
            body["instructions"] = self.instructions
        if self.reasoning:
            body["reasoning"] = {"effort": self.reasoning}
        if self.max_output_tokens:
            body["max_output_tokens"] = self.max_output_tokens
        if tools:
            body["tools"] = tools
        return body

    def turns(self) -> int:
        return sum(1 for i in self.items if i.get("type") == "message" and i.get("role") == "user")

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.body(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    def load(self, path: Path) -> str | None:
        """Replace the conversation with a saved one; returns the saved model id (if any)."""
        doc = read_json(path, SessionFileError)
        items = doc.get("input") if isinstance(doc, dict) else doc
        if isinstance(items, str):
            items = [user_item(items)]
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SessionFileError(f"{path} is not a Responses session (an 'input' list of items)")
        self.items = [dict(i) for i in items]
        if isinstance(doc, dict):
            instructions = doc.get("instructions")
            self.instructions = instructions if isinstance(instructions, str) and instructions else None
            effort = (doc.get("reasoning") or {}).get("effort") if isinstance(doc.get("reasoning"), dict) else None
            self.reasoning = effort if isinstance(effort, str) else self.reasoning
            model = doc.get("model")
            return model if isinstance(model, str) else None
        return None
