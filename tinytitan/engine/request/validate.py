"""The ONE validator (reference §4). Every protocol funnels its mapped ``ChatRequest`` here.

It checks the client's values, applies the model's defaults, merges the leading guidance into one
system text, resolves the reasoning level and returns a ``ValidatedRequest``. Errors name the
field in the client's own spelling: every message, part, tool and tool call carries the ``Source``
its mapper gave it, and the request names its differently spelled top-level fields.
"""

from __future__ import annotations

import json
from typing import Any

from tinytitan.engine.errors import InvalidRequest, text_only
from tinytitan.engine.request import (
    ChatRequest,
    Image,
    Message,
    ModelInfo,
    Part,
    Sampling,
    Source,
    Tool,
    ToolCall,
    Turn,
    ValidatedRequest,
)
from tinytitan.engine.request.defaults import REQUEST, applied_defaults
from tinytitan.engine.request.deferred import REFERENCE, expand_references, split_tools
from tinytitan.engine.request.limits import MAX_SCHEMA_DEPTH, MAX_TOOLS
from tinytitan.engine.request.output_format import parse_output_format
from tinytitan.engine.request.reasoning import resolve_level
from tinytitan.engine.request.sampling import FROM_MODEL, KNOBS, by_name, out_of_range
from tinytitan.engine.request.tools import check_tool_choice, check_tools

__all__ = ["IMAGE", "MAX_MESSAGES", "MAX_SCHEMA_DEPTH", "MAX_TOOLS", "image_placeholder", "message_text", "validate"]

MAX_MESSAGES = 1000
IMAGE = "image"  # the part type every mapper gives an image
MAX_STOP = 4
MAX_STOP_BYTES = 256
_ROLES = {"system", "developer", "user", "assistant", "tool"}
# where a server-built value (no Source) would sit, in the neutral (Chat) spelling
_CALL_SPELLING = {"name": "function.name", "arguments": "function.arguments"}


def validate(request: ChatRequest, model: ModelInfo, *, strip_cli: bool = False) -> ValidatedRequest:
    _check_refusals(request)
    system, turns, revealed = _check_messages(request, model)
    tools, deferred = split_tools(check_tools(request, model))
    found = tuple(t for t in revealed if t.deferred)
    tools, tool_choice, forced = check_tool_choice(request, tools, model, deferred, found)
    output_format = parse_output_format(request.output_format)
    sampling, sampling_from = _check_sampling(request, model)
    resolution = resolve_level(
        request.reasoning,
        model.reasoning_levels,
        model.default_reasoning,
        request_id=request.request_id,
        force_off=_force_off(output_format is not None, tool_choice),
    )
    callable_now = tool_choice != "none" and model.tool_calls  # no syntax: no tools in its prompt
    return ValidatedRequest(
        request=request,
        model_id=model.id,
        system=system,
        turns=turns,
        tools=tools if callable_now else (),
        tool_choice=tool_choice,
        sampling=sampling,
        stop=_check_stop(request),
        cap=_check_cap(request, model),
        reasoning_level=resolution.level,
        output_format=output_format,
        strip_cli=strip_cli,
        forced_tool=forced,
        sampling_from=sampling_from,
        tool_calls=model.tool_calls,
        deferred=deferred if callable_now else (),
        revealed=found if callable_now else (),
    )


def _check_refusals(request: ChatRequest) -> None:
    if request.n is not None and request.n != 1:
        raise InvalidRequest("n must be 1: one choice per request", param="n", code="unsupported_value")
    if request.logprobs:
        raise InvalidRequest("logprobs are not supported", param="logprobs", code="unsupported_value")
    if request.top_logprobs:
        raise InvalidRequest("top_logprobs is not supported", param="top_logprobs", code="unsupported_value")
    if request.include_usage is not None and not request.stream:
        raise InvalidRequest(
            "stream_options is only allowed together with stream: true",
            param="stream_options.include_usage",
        )


def message_text(message: Message, where: Source) -> str:
    """A message's text, an image part read as its stated placeholder (a transcript's); any other
    non-text part is refused by name (``unsupported_content``), never dropped."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for j, part in enumerate(content):
        here = part.source or Source(f"{where.at('content')}[{j}]")
        if part.type == IMAGE:
            texts.append(image_placeholder(part.image))
            continue
        texts.append(_part_text(part, here))
    return "".join(texts)


def image_placeholder(image: Image | None) -> str:
    """What stands for an image where only text can go (a compaction transcript)."""
    if image is None:
        return "[image]"
    kind = image.media_type.removeprefix("image/").upper()
    return f"[image: {kind} {image.width}x{image.height}, sha256 {image.digest[:12]}]"


def _part_text(part: Part, here: Source) -> str:
    if part.type not in ("text", "input_text", "output_text"):
        raise text_only(f"content parts of type '{part.type}'", here.path)
    if part.text is None:
        raise InvalidRequest("a text part needs a 'text' string", param=here.at("text"))
    return part.text


def _content(message: Message, where: Source, model: ModelInfo) -> tuple[str, tuple[str | Image, ...]]:
    """A user or tool message's text and, when it holds images, its text pieces and images in order.
    Images reach only a model with vision input; a text-only model refuses them by name."""
    content = message.content
    if not isinstance(content, tuple) or not any(p.type == IMAGE for p in content):
        return message_text(message, where), ()
    pieces: list[str | Image] = []
    for j, part in enumerate(content):
        here = part.source or Source(f"{where.at('content')}[{j}]")
        if part.type != IMAGE:
            pieces.append(_part_text(part, here))
        elif not model.vision:
            raise InvalidRequest(
                f"model '{model.id}' has no vision input: it reads text only, so it cannot take images; "
                "serve a vision-language model to send them",
                param=here.path,
                code="unsupported_content",
            )
        elif message.role not in ("user", "tool"):
            raise InvalidRequest(
                "images are only allowed in user messages and tool results",
                param=here.path,
                code="unsupported_content",
            )
        elif part.image is None:  # the engine checks every image before validation
            raise InvalidRequest("the image was not read", param=here.path, code="invalid_image")
        else:
            pieces.append(part.image)
    text = "".join(p for p in pieces if isinstance(p, str))
    return text, tuple(pieces)


def _text(
    message: Message, where: Source, catalog: dict[str, Tool], revealed: list[Tool], model: ModelInfo
) -> tuple[str, tuple[str | Image, ...]]:
    """A message's text (and parts, with images); a tool result's ``tool_reference`` parts are
    expanded (and what they name kept)."""
    content = message.content
    if message.role == "tool" and isinstance(content, tuple) and any(p.type == REFERENCE for p in content):
        text, named = expand_references(message, where, catalog)
        revealed.extend(t for t in named if t not in revealed)
        return text, ()
    return _content(message, where, model)


def _check_messages(request: ChatRequest, model: ModelInfo) -> tuple[str | None, tuple[Turn, ...], tuple[Tool, ...]]:
    name = request.messages_param
    messages = request.messages
    if not messages:
        raise InvalidRequest(f"{name} must not be empty", param=name, code="invalid_message")
    if len(messages) > MAX_MESSAGES:
        raise InvalidRequest(
            f"at most {MAX_MESSAGES} messages are allowed, got {len(messages)}",
            param=name,
            code="value_too_large",
        )
    guidance: list[str] = []
    turns: list[Turn] = []
    open_calls: dict[str, str] = {}  # id -> function name, awaiting a result
    seen_ids: set[str] = set()
    catalog = {t.name: t for t in request.tools}
    revealed: list[Tool] = []
    for i, message in enumerate(messages):
        where = message.source or Source(f"{name}[{i}]")
        role = message.role
        if role not in _ROLES:
            raise InvalidRequest(
                f"unknown role '{role}'; expected one of system, developer, user, assistant, tool",
                param=where.at("role"),
                code="invalid_message",
            )
        text, parts = _text(message, where, catalog, revealed, model)
        if role in ("system", "developer"):
            if turns:
                raise InvalidRequest(
                    "system or developer guidance must precede the conversation",
                    param=where.at("role"),
                    code="invalid_message",
                )
            if text:
                guidance.append(text)
            continue
        if message.tool_calls and role != "assistant":
            raise InvalidRequest(
                "tool_calls are only allowed on assistant messages",
                param=where.at("tool_calls"),
                code="invalid_tool_call",
            )
        if role == "assistant":
            calls = _check_calls(message.tool_calls, where, seen_ids)
            open_calls.update({c.id: c.name for c in calls})
            turns.append(Turn("assistant", text, tool_calls=calls, reasoning=message.reasoning or None))
        elif role == "tool":
            call_id = message.tool_call_id
            if not call_id or call_id not in open_calls:
                raise InvalidRequest(
                    f"tool message answers no earlier unresolved tool call (tool_call_id '{call_id or ''}')",
                    param=where.at("tool_call_id"),
                    code="invalid_tool_result",
                )
            turns.append(Turn("tool", text, parts, tool_call_id=call_id, name=open_calls.pop(call_id)))
        else:
            if message.content is None:
                raise InvalidRequest("a user message needs content", param=where.at("content"), code="invalid_message")
            turns.append(Turn("user", text, parts))
    if not turns:
        raise InvalidRequest(
            f"{name} must contain at least one user, assistant or tool message",
            param=name,
            code="invalid_message",
        )
    if open_calls:
        pending = ", ".join(sorted(open_calls))
        raise InvalidRequest(
            f"the conversation ends with unresolved tool calls ({pending}); send their results as tool messages",
            param=name,
            code="invalid_tool_call",
        )
    return ("\n\n".join(guidance) if guidance else None), tuple(turns), tuple(revealed)


def _check_calls(calls: tuple[ToolCall, ...], where: Source, seen: set[str]) -> tuple[ToolCall, ...]:
    for k, call in enumerate(calls):
        here = call.source or Source(f"{where.at('tool_calls')}[{k}]", _CALL_SPELLING)
        if not call.id:
            raise InvalidRequest("a tool call needs a non-empty id", param=here.at("id"), code="invalid_tool_call")
        if call.id in seen:
            raise InvalidRequest(f"duplicate tool call id '{call.id}'", param=here.at("id"), code="invalid_tool_call")
        seen.add(call.id)
        if not call.name:
            raise InvalidRequest("a tool call needs a function name", param=here.at("name"), code="invalid_tool_call")
        if call.type == "custom":  # a custom tool's input is freeform text
            continue
        try:
            args = json.loads(call.arguments) if call.arguments.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            args = None
        if not isinstance(args, dict):
            raise InvalidRequest(
                "tool call arguments must be a JSON object",
                param=here.at("arguments"),
                code="invalid_tool_arguments",
            )
    return calls


def _force_off(structured: bool, tool_choice: str) -> str | None:
    """Why thinking must be off: the grammar constrains every token from the first one."""
    if structured:
        return "structured output"
    if tool_choice in ("required", "function"):
        return "a forced tool call"
    return None


def _check_sampling(request: ChatRequest, model: ModelInfo) -> tuple[Sampling, dict[str, str]]:
    s = request.sampling
    for knob in KNOBS:  # the one table (request/sampling.py), with the protocol's own bounds
        value = getattr(s, knob.name)
        high = request.temperature_max if knob.name == "temperature" else None
        low_open = not request.top_p_zero if knob.name == "top_p" else None
        why = None if value is None else out_of_range(knob, value, high=high, low_open=low_open)
        if why is not None:
            raise InvalidRequest(f"{knob.name} {why}, got {value:g}", param=knob.name)
    if s.frequency_penalty:
        raise InvalidRequest(
            "frequency_penalty is not supported; use presence_penalty or repetition_penalty",
            param="frequency_penalty",
            code="unsupported_value",
        )
    if s.seed is not None and not 0 <= s.seed < 2**64:
        raise InvalidRequest("seed must be an unsigned 64-bit integer", param="seed")
    asked = {k: getattr(s, k) for k in FROM_MODEL}
    applied = applied_defaults(model) | {k: (v, REQUEST) for k, v in asked.items() if v is not None}
    applied = {k: (v, source) for k, (v, source) in applied.items() if v or k != "min_p"}  # min_p 0: none
    values: dict[str, Any] = {k: by_name(k).kind(v) for k, (v, _) in applied.items()}
    sampling = Sampling(**values, presence_penalty=s.presence_penalty, seed=s.seed)
    return sampling, {k: source for k, (_, source) in applied.items()}


def _check_cap(request: ChatRequest, model: ModelInfo) -> int:
    """The output cap; above the context window it is clamped on every protocol (reference §4)."""
    cap, param = request.max_tokens, request.cap_param
    if cap is None:
        return model.context_window
    if cap <= 0:
        raise InvalidRequest(f"{param} must be greater than 0, got {cap}", param=param)
    return min(cap, model.context_window)


def _check_stop(request: ChatRequest) -> tuple[str, ...]:
    param = request.stop_param
    items = request.stop
    if items is None:
        return ()
    if len(items) > MAX_STOP:
        raise InvalidRequest(f"at most {MAX_STOP} stop strings are allowed, got {len(items)}", param=param)
    if any(not s for s in items):
        raise InvalidRequest("stop strings must not be empty", param=param)
    unique = tuple(dict.fromkeys(items))
    if sum(len(s.encode()) for s in unique) > MAX_STOP_BYTES:
        raise InvalidRequest(f"stop strings may total at most {MAX_STOP_BYTES} bytes", param=param)
    return unique
