"""The response object before any output (reference §9): every field the Responses object has, the
request's echoed as values the Open Responses schema allows (the mapper refused any other value).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from tinytitan.engine.request import Sampling, new_id

from .protocol import ResponsesRequest
from .wire import Response, ResponseReasoning, ResponseText

__all__ = ["response_shell"]


def response_shell(wire: ResponsesRequest, *, model: str, sampling: Sampling, store: bool) -> Response:
    """The response object before any output: every field of reference §9, echoing the request as
    values the Responses schema allows (the mapper refused any other)."""
    reasoning = wire.reasoning
    text = wire.text
    return Response(
        id=new_id("resp_"),
        created_at=int(time.time()),
        instructions=wire.instructions,
        max_output_tokens=wire.max_output_tokens,
        max_tool_calls=wire.max_tool_calls,
        model=model,
        parallel_tool_calls=True if wire.parallel_tool_calls is None else wire.parallel_tool_calls,
        previous_response_id=wire.previous_response_id,
        prompt_cache_key=wire.prompt_cache_key,
        reasoning=ResponseReasoning(
            effort=_ECHOED_EFFORT.get(reasoning.effort, reasoning.effort) if reasoning and reasoning.effort else None,
            summary=(reasoning.summary or reasoning.generate_summary) if reasoning else None,
        ),
        safety_identifier=wire.safety_identifier,
        store=store,
        # a greedy pass (a compaction) has no nucleus: 1.0 is what it used, and the schema wants a number
        temperature=1.0 if sampling.temperature is None else sampling.temperature,
        top_p=1.0 if sampling.top_p is None else sampling.top_p,
        presence_penalty=sampling.presence_penalty if sampling.presence_penalty is not None else 0.0,
        text=ResponseText(
            format=_echoed_format(text.format if text else None),
            verbosity=(text.verbosity if text and text.verbosity else "medium"),
        ),
        tool_choice=wire.tool_choice if wire.tool_choice is not None else "auto",
        tools=_echoed_tools(wire.tools or ()),
        truncation=wire.truncation or "disabled",
        user=wire.user,
        metadata=wire.metadata or {},
    )


# OpenAI's ``minimal`` is not among the efforts the Open Responses schema allows in a response; the
# nearest one that is stands for it (the level applied is the nearest the model renders either way)
_ECHOED_EFFORT = {"minimal": "low"}


def _echoed_format(fmt: dict[str, Any] | None) -> dict[str, Any]:
    """``text.format`` as asked, with the fields the schema requires of a ``json_schema`` format."""
    if fmt is None:
        return {"type": "text"}
    if fmt.get("type") == "json_schema":
        return {"description": None, "strict": False, **fmt}
    return fmt


def _echoed_tools(tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools the model had (the schema's "tools that were available to the model"): the function
    tools as sent — a namespace's functions among them, flattened as the prompt has them — with the
    fields the schema requires of one (``description``, ``parameters``, ``strict``; ``null`` when
    unset), and the custom tools as sent. Hosted tools (web_search, …) never reach the model, so they
    are not listed."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        kind = tool.get("type", "function")
        if kind == "function":
            out.append({"type": "function", **{k: tool.get(k) for k in _FUNCTION_FIELDS}, **tool})
            out[-1]["type"] = "function"
        elif kind == "custom":
            out.append(tool)
        elif kind == "namespace" and isinstance(tool.get("tools"), list):
            out += _echoed_tools(t for t in tool["tools"] if isinstance(t, dict))
    return out


_FUNCTION_FIELDS = ("name", "description", "parameters", "strict")
