"""Wire documents read from files (the CLI's ``count-tokens`` and ``compact``), mapped by the protocols' own code.

A saved request or session is detected as Chat Completions, Responses or Messages and handed to
that protocol's mapper, so the CLI refuses and counts exactly as the server would.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from tinytitan.engine.errors import InvalidRequest
from tinytitan.engine.request import ChatRequest
from tinytitan.engine.request.router import FAST_SUFFIX

__all__ = ["API_NAMES", "Api", "detect_api", "parse_api", "to_chat_request"]

Api = Literal["chat", "responses", "messages"]
API_NAMES: tuple[Api, ...] = ("chat", "responses", "messages")
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}


def _has_anthropic_blocks(messages: Any) -> bool:
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


def parse_api(name: str) -> Api:
    """``chat``, ``responses`` or ``messages``; ``ValueError`` naming the choices otherwise."""
    for api in API_NAMES:
        if name == api:
            return api
    raise ValueError(f"--api takes one of {', '.join(API_NAMES)}")


def detect_api(doc: Any) -> Api:
    """Which protocol a request (or a bare message / item array) is written in."""
    if isinstance(doc, list):
        if any(isinstance(x, dict) and ("type" in x or "call_id" in x) for x in doc):
            return "responses"
        return "messages" if _has_anthropic_blocks(doc) else "chat"
    if not isinstance(doc, dict):
        raise InvalidRequest("a request is a JSON object (or an array of messages / input items)")
    if "input" in doc:
        return "responses"
    if "system" in doc or "stop_sequences" in doc or "thinking" in doc or _has_anthropic_blocks(doc.get("messages")):
        return "messages"
    return "chat"


def _convert(doc: dict[str, Any], wire_type: type[Any]) -> Any:
    try:
        return msgspec.convert(doc, type=wire_type)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"malformed request: {exc}", code="invalid_json") from None


def to_chat_request(doc: Any, api: Api, *, model: str, session: bool = False) -> ChatRequest:
    """Map ``doc`` with ``api``'s own mapper, for ``model``; ``session``: a saved conversation (to
    compact), which may end with the assistant's reply.

    A saved request is counted or compacted with the model the user gave, whatever model it named
    (a Claude Code capture names ``claude-*``; a request saved from a ``--model-id`` server names
    that id) — except ``<model>-fast``, which keeps the strip the server would apply.
    """
    if isinstance(doc, list):
        doc = {"input": doc} if api == "responses" else {"messages": doc}
    named = doc.get("model")
    doc = {**doc, "model": named if named == model + FAST_SUFFIX else model}
    if api == "responses":
        from tinytitan.api.responses.mapping import to_chat_request as from_responses
        from tinytitan.api.responses.protocol import ResponsesRequest

        chat, _current = from_responses(_convert(doc, ResponsesRequest), history=[], resolve=lambda _id: None)
        return chat
    if api == "messages":
        from tinytitan.api.anthropic.mapping import to_chat_request as from_messages
        from tinytitan.api.anthropic.protocol import MessagesRequest

        return from_messages(_convert(doc, MessagesRequest), count_only=True, session=session)
    from tinytitan.api.chat_completions.mapping import to_chat_request as from_chat
    from tinytitan.api.chat_completions.protocol import ChatCompletionRequest

    return from_chat(_convert(doc, ChatCompletionRequest))
