"""The conversation: Responses input items, resent whole each turn (``store: false``, as Codex does).

The history is exactly what a Responses client would send as ``input``: the user's messages and
the output items the server returned (reasoning, messages, function calls), plus the outputs of
the tools the chat ran. A saved session is the request body itself (``model``, ``instructions``,
``reasoning``, ``input``), so ``tinytitan compact FILE`` and ``tinytitan count-tokens FILE`` read
it as they read any saved Responses request. ``/load`` reads what those two read: a Responses
session, or a Chat Completions or Anthropic Messages request (or bare message array), mapped by
the protocol's own mapper and written back as Responses items.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinytitan.jsonfile import read_json

if TYPE_CHECKING:
    from tinytitan.api.offline import Api
    from tinytitan.engine.request import Message

__all__ = ["DEFAULT_MAX_TOKENS", "Session", "SessionFileError", "assistant_item", "count", "user_item"]

DEFAULT_MAX_TOKENS = 2048  # the chat's output cap unless --max-tokens or /max-tokens says otherwise


class SessionFileError(ValueError):
    """A file /load cannot use; the message says why."""


def count(n: int, noun: str) -> str:
    """``1 item``, ``2 items``, ``0 turns``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def user_item(text: str, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A user message: its text, then any ``input_image`` parts attached to it."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}, *(images or [])]}


def assistant_item(text: str) -> dict[str, Any]:
    """An assistant message the chat writes itself (the visible part of an interrupted answer)."""
    return {
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


# The Responses API's reasoning.effort for the ladder levels it does not define (it refuses other words):
# off is its "none"; on and max ask for the most the model renders, which "xhigh" resolves to on every
# model without a max level (reference §5's nearest level).
API_EFFORT = {"off": "none", "on": "xhigh", "max": "xhigh"}


@dataclass
class Session:
    model: str
    instructions: str | None = None
    reasoning: str | None = None  # a ladder level, or None for the server's default
    max_output_tokens: int | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)  # attached (/image), sent with the next message

    def take_images(self) -> list[dict[str, Any]]:
        """The attached pictures, for the message being sent (none left attached)."""
        taken, self.images = self.images, []
        return taken

    def body(self, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The Responses request for the next turn (without ``stream``)."""
        body: dict[str, Any] = {"model": self.model, "input": list(self.items), "store": False}
        if self.instructions:
            body["instructions"] = self.instructions
        if self.reasoning:
            body["reasoning"] = {"effort": API_EFFORT.get(self.reasoning, self.reasoning)}
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
        """Replace the conversation with a saved one (any of the three shapes); returns its model id, if any."""
        from tinytitan.api.offline import detect_api
        from tinytitan.engine.errors import InvalidRequest
        from tinytitan.engine.request.reasoning import normalize_level

        doc = read_json(path, SessionFileError)
        if not isinstance(doc, dict | list) or (isinstance(doc, dict) and "input" not in doc and "messages" not in doc):
            raise SessionFileError(
                f"{path} is not a saved session: a Responses request ('input'), a Chat or Messages "
                "request ('messages'), or an array of either's items"
            )
        try:
            api = detect_api(doc)
            items, instructions = _responses_items(doc) if api == "responses" else _mapped_items(doc, api)
        except InvalidRequest as exc:
            where = f" (at {exc.param})" if exc.param else ""
            raise SessionFileError(f"{path} is not a usable session: {exc.message}{where}") from None
        self.items = items
        if instructions is not None or isinstance(doc, dict):  # a bare array keeps the system prompt
            self.instructions = instructions
        if isinstance(doc, dict):
            effort = (doc.get("reasoning") or {}).get("effort") if isinstance(doc.get("reasoning"), dict) else None
            self.reasoning = normalize_level(effort) if isinstance(effort, str) else self.reasoning
            model = doc.get("model")
            return model if isinstance(model, str) else None
        return None


def _responses_items(doc: Any) -> tuple[list[dict[str, Any]], str | None]:
    items = doc.get("input") if isinstance(doc, dict) else doc
    if isinstance(items, str):
        items = [user_item(items)]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        from tinytitan.engine.errors import InvalidRequest

        raise InvalidRequest("'input' must be a list of items (or a string)", param="input")
    instructions = doc.get("instructions") if isinstance(doc, dict) else None
    return [dict(i) for i in items], instructions if isinstance(instructions, str) and instructions else None


def _mapped_items(doc: Any, api: Api) -> tuple[list[dict[str, Any]], str | None]:
    """A Chat or Messages conversation through its own mapper, as Responses items (the text parts)."""
    from tinytitan.api.offline import to_chat_request

    items: list[dict[str, Any]] = []
    system: list[str] = []
    raw = doc.get("messages") if isinstance(doc, dict) else doc
    ends_with_answer = (
        isinstance(raw, list) and bool(raw) and isinstance(raw[-1], dict) and raw[-1].get("role") == "assistant"
    )
    if ends_with_answer:  # a saved conversation ends with the answer; the Messages mapper reads that as a prefill
        raw = [*list(raw or []), {"role": "user", "content": "."}]
        doc = {**doc, "messages": raw} if isinstance(doc, dict) else raw
    messages = to_chat_request(doc, api, model="session").messages
    for message in messages[:-1] if ends_with_answer else messages:
        text = _text(message)
        if message.role in ("system", "developer"):
            system.append(text)
        elif message.role == "user":
            items.append(user_item(text, _images(message)))
        elif message.role == "tool":
            items.append({"type": "function_call_output", "call_id": message.tool_call_id or "", "output": text})
        elif message.role == "assistant":
            if text:
                items.append({**assistant_item(text), "status": "completed"})
            items += [
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in message.tool_calls
            ]
        else:
            from tinytitan.engine.errors import InvalidRequest

            raise InvalidRequest(
                f"a message has the role '{message.role}'; a session holds system, user, assistant and tool"
            )
    return items, "\n\n".join(t for t in system if t) or None


def _images(message: Message) -> list[dict[str, Any]]:
    """A mapped message's pictures as ``input_image`` parts (as the client sent them)."""
    parts = message.content if isinstance(message.content, tuple) else ()
    out: list[dict[str, Any]] = []
    for part in parts:
        ref = part.ref
        if ref is not None:
            bare = ref.media_type is not None and not ref.url.startswith(("data:", "http://", "https://"))
            url = f"data:{ref.media_type};base64,{ref.url}" if bare else ref.url
            out.append({"type": "input_image", "image_url": url, **({"detail": ref.detail} if ref.detail else {})})
    return out


def _text(message: Message) -> str:
    if isinstance(message.content, str) or message.content is None:
        return message.content or ""
    return "".join(p.text or "" for p in message.content if p.type == "text")
