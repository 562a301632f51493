"""What the server sends, checked against the protocols' own schemas (``schemas/README.md`` says
where each comes from): the Open Responses specification for the Responses object, its stream
events and the WebSocket's events; Anthropic's documented shapes for the Messages objects and events.

Each ``check_*`` raises ``AssertionError`` naming the JSON path that breaks the schema and why — the
SDKs' models are lenient by design (a ``null`` where a number belongs, an enum value off the list
passes them), a strict client is not.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

__all__ = [
    "check_anthropic",
    "check_messages_event",
    "check_open_responses",
    "check_responses_event",
    "check_socket_event",
]

_HERE = Path(__file__).resolve().parent / "schemas"
OPEN_RESPONSES = "open-responses-2026-04-24.json"
CUSTOM_TOOLS = "openai-custom-tools.json"  # what the release lacks: OpenAI's custom (freeform) tools
ANTHROPIC = "anthropic-messages.json"
_OR_URI = "urn:tinytitan:open-responses"


@functools.cache
def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((_HERE / name).read_text(encoding="utf-8"))
    return document


_STATUS = {"type": "string", "enum": ["in_progress", "completed", "incomplete"]}
# Items OpenAI's Responses API defines that the 2026-04-24 release lacks (README): the tool search
# items, field by field as OpenAI's reference and the ``openai`` SDK 3.63.0 (``ResponseToolSearchCall``,
# ``ResponseToolSearchOutputItem``) define them
_TOOL_SEARCH_ITEMS = {
    "ToolSearchCall": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["tool_search_call"]},
            "id": {"type": "string"},
            "call_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "execution": {"type": "string", "enum": ["server", "client"]},
            "status": _STATUS,
            "arguments": {},
            "created_by": {"type": "string"},
        },
        "required": ["type", "id", "execution", "status", "arguments"],
        "additionalProperties": False,
    },
    "ToolSearchOutput": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["tool_search_output"]},
            "id": {"type": "string"},
            "call_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "execution": {"type": "string", "enum": ["server", "client"]},
            "status": _STATUS,
            "tools": {"type": "array", "items": {"type": "object", "required": ["type"]}},
            "created_by": {"type": "string"},
        },
        "required": ["type", "id", "execution", "status", "tools"],
        "additionalProperties": False,
    },
}


def _open_responses() -> dict[str, Any]:
    document = copy.deepcopy(_load(OPEN_RESPONSES))
    # the release's erratum (README): a json_schema format's ``schema`` may be only null there
    schemas = document["components"]["schemas"]
    schemas["JsonSchemaResponseFormat"]["properties"]["schema"] = {"anyOf": [{"type": "object"}, {"type": "null"}]}
    schemas.update(copy.deepcopy(_TOOL_SEARCH_ITEMS))  # OpenAI's items the release lacks (README)
    schemas["ItemField"]["oneOf"] += [{"$ref": f"#/components/schemas/{name}"} for name in _TOOL_SEARCH_ITEMS]
    # the release has no custom tools (README): OpenAI's shapes of them join the unions they belong to
    schemas.update(copy.deepcopy(_load(CUSTOM_TOOLS)["components"]["schemas"]))

    def ref(name: str) -> dict[str, str]:
        return {"$ref": f"#/components/schemas/{name}"}

    schemas["ItemField"]["oneOf"] += [ref("CustomToolCall"), ref("CustomToolCallOutput")]
    schemas["Tool"]["oneOf"].append(ref("CustomTool"))
    schemas["ResponseResource"]["properties"]["tool_choice"]["oneOf"].append(ref("CustomToolChoice"))
    schemas["AllowedToolChoice"]["properties"]["tools"]["items"]["oneOf"].append(ref("CustomToolChoice"))
    return document


@functools.cache
def _validator(uri: str, pointer: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    anthropic = _load(ANTHROPIC)
    registry: Registry[Any] = Registry().with_resources(
        [
            (_OR_URI, DRAFT202012.create_resource(_open_responses())),
            (anthropic["$id"], DRAFT202012.create_resource(anthropic)),
        ]
    )
    return Draft202012Validator({"$ref": f"{uri}#{pointer}"}, registry=registry)


def _check(uri: str, pointer: str, value: Any, what: str) -> None:
    validator = _validator(uri, pointer)
    errors = [_cause(e) for e in validator.iter_errors(value)]
    if errors:
        lines = []
        for error in sorted(errors, key=lambda e: len(list(e.absolute_path)))[:5]:
            path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "(root)"
            lines.append(f"  at {path}: {str(error.message)[:300]}")
        raise AssertionError(f"{what} breaks its schema {pointer.rsplit('/', 1)[-1]}:\n" + "\n".join(lines))


def _cause(error: Any) -> Any:
    """The deepest cause of a ``oneOf`` / ``anyOf`` failure (what the branch that should match lacked)."""
    if error.context:
        return _cause(max(error.context, key=lambda e: len(list(e.absolute_path))))
    return error


def check_open_responses(value: Any, schema: str) -> None:
    """``value`` against the Open Responses component ``schema`` (``ResponseResource``,
    ``CompactResource``, ``ItemField``, ``WebSocketErrorEvent``, …)."""
    _check(_OR_URI, f"/components/schemas/{schema}", value, schema)


_RESPONSES_EVENTS = {
    "response.created": "ResponseCreatedStreamingEvent",
    "response.queued": "ResponseQueuedStreamingEvent",
    "response.in_progress": "ResponseInProgressStreamingEvent",
    "response.completed": "ResponseCompletedStreamingEvent",
    "response.failed": "ResponseFailedStreamingEvent",
    "response.incomplete": "ResponseIncompleteStreamingEvent",
    "response.output_item.added": "ResponseOutputItemAddedStreamingEvent",
    "response.output_item.done": "ResponseOutputItemDoneStreamingEvent",
    "response.reasoning_summary_part.added": "ResponseReasoningSummaryPartAddedStreamingEvent",
    "response.reasoning_summary_part.done": "ResponseReasoningSummaryPartDoneStreamingEvent",
    "response.content_part.added": "ResponseContentPartAddedStreamingEvent",
    "response.content_part.done": "ResponseContentPartDoneStreamingEvent",
    "response.output_text.delta": "ResponseOutputTextDeltaStreamingEvent",
    "response.output_text.done": "ResponseOutputTextDoneStreamingEvent",
    "response.reasoning_summary_text.delta": "ResponseReasoningSummaryDeltaStreamingEvent",
    "response.reasoning_summary_text.done": "ResponseReasoningSummaryDoneStreamingEvent",
    "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaStreamingEvent",
    "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneStreamingEvent",
    "response.custom_tool_call_input.delta": "ResponseCustomToolCallInputDeltaStreamingEvent",
    "response.custom_tool_call_input.done": "ResponseCustomToolCallInputDoneStreamingEvent",
    "error": "ErrorStreamingEvent",
}


def _check_event(event: Any, where: str, stream: str, pointers: dict[str, str], uri: str) -> None:
    """``event`` against the schema its ``type`` names in ``pointers`` (one of ``stream``'s events)."""
    kind = event.get("type") if isinstance(event, dict) else None
    pointer = pointers.get(kind) if isinstance(kind, str) else None
    assert pointer is not None, f"{where}: {kind!r} is not an event of the {stream} stream"
    _check(uri, pointer, event, f"{where} ({kind})")


def check_responses_event(event: Any, where: str = "event") -> None:
    """One Responses stream event (SSE or WebSocket) against the schema of its ``type``."""
    pointers = {kind: f"/components/schemas/{name}" for kind, name in _RESPONSES_EVENTS.items()}
    _check_event(event, where, "Open Responses", pointers, _OR_URI)


def check_socket_event(event: Any, where: str = "frame") -> None:
    """One WebSocket frame from the server: a stream event, or the transport's error event."""
    if isinstance(event, dict) and event.get("type") == "error":
        _check(_OR_URI, "/components/schemas/WebSocketErrorEvent", event, f"{where} (error)")
    else:
        check_responses_event(event, where)


def check_anthropic(value: Any, definition: str) -> None:
    """``value`` against a definition of the Anthropic document (``Message``, ``ErrorResponse``,
    ``MessageTokensCount``, ``ModelInfo``, ``ModelList``, …)."""
    uri = _load(ANTHROPIC)["$id"]
    _check(uri, f"/$defs/{definition}", value, definition)


_MESSAGES_EVENTS = {
    "message_start": "MessageStartEvent",
    "content_block_start": "ContentBlockStartEvent",
    "content_block_delta": "ContentBlockDeltaEvent",
    "content_block_stop": "ContentBlockStopEvent",
    "message_delta": "MessageDeltaEvent",
    "message_stop": "MessageStopEvent",
    "ping": "PingEvent",
    "error": "ErrorResponse",
}


def check_messages_event(event: Any, where: str = "event") -> None:
    """One Messages stream event against Anthropic's documented shape of its ``type``."""
    pointers = {kind: f"/$defs/{name}" for kind, name in _MESSAGES_EVENTS.items()}
    _check_event(event, where, "Messages", pointers, _load(ANTHROPIC)["$id"])
