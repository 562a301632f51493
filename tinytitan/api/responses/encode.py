"""Engine events → the Responses object and its event stream (reference §9).

``OutputBuilder`` is the one place output items are made: the stream encoder and the non-streaming
path both feed it the engine's events, so the streamed final object and the plain one are built by
the same code. ``ResponsesStream`` is this protocol's ``Encoder`` (``tinytitan.api.streaming``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from tinytitan.api.errors import openai_error
from tinytitan.api.sse import SSE
from tinytitan.engine.errors import TinyTitanError
from tinytitan.engine.events import Event, Finished, ReasoningDelta, TextDelta, ToolCall, Usage
from tinytitan.engine.job import Completion
from tinytitan.engine.passes.compaction import CompactionResult
from tinytitan.engine.request import Sampling, new_id

from .mapping import new_item_id
from .protocol import ResponsesRequest

__all__ = [
    "OutputBuilder",
    "ResponsesStream",
    "compaction_item",
    "compaction_object",
    "response_shell",
    "usage_object",
]


def usage_object(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def response_shell(wire: ResponsesRequest, *, model: str, sampling: Sampling, store: bool) -> dict[str, Any]:
    """The response object before any output: every field of reference §9, echoing the request."""
    reasoning = wire.reasoning
    text = wire.text
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "completed_at": None,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": wire.instructions,
        "max_output_tokens": wire.max_output_tokens,
        "max_tool_calls": wire.max_tool_calls,
        "model": model,
        "output": [],
        "parallel_tool_calls": True if wire.parallel_tool_calls is None else wire.parallel_tool_calls,
        "previous_response_id": wire.previous_response_id,
        "prompt_cache_key": wire.prompt_cache_key,
        "reasoning": {
            "effort": reasoning.effort if reasoning else None,
            "summary": (reasoning.summary or reasoning.generate_summary) if reasoning else None,
        },
        "safety_identifier": wire.safety_identifier,
        "service_tier": "default",
        "store": store,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "presence_penalty": sampling.presence_penalty if sampling.presence_penalty is not None else 0.0,
        "frequency_penalty": 0.0,
        "text": {
            "format": (text.format if text and text.format is not None else {"type": "text"}),
            "verbosity": (text.verbosity if text and text.verbosity else "medium"),
        },
        "tool_choice": wire.tool_choice if wire.tool_choice is not None else "auto",
        "tools": [_echoed_tool(t) for t in wire.tools or ()],
        "top_logprobs": 0,
        "truncation": wire.truncation or "disabled",
        "usage": None,
        "user": wire.user,
        "metadata": wire.metadata or {},
    }


def _echoed_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the response echoes it: as sent, with the fields the Responses schema requires of a
    function tool (``description``, ``parameters``, ``strict``) present — ``null`` when unset."""
    out = dict(tool)
    if out.get("type", "function") == "function":
        out["type"] = "function"
        for key in ("description", "parameters", "strict"):
            out.setdefault(key, None)
    elif out.get("type") == "namespace" and isinstance(out.get("tools"), list):
        out["tools"] = [_echoed_tool(t) if isinstance(t, dict) else t for t in out["tools"]]
    return out


class OutputBuilder:
    """Accumulates output items from engine events; each step returns the stream events it implies."""

    def __init__(self, shell: dict[str, Any]) -> None:
        self.response = shell
        self.output: list[dict[str, Any]] = shell["output"]
        self.sequence = 0
        self._open: dict[str, Any] | None = None  # the reasoning or message item being written
        self._buffer: list[str] = []

    def _event(self, kind: str, **payload: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **payload}
        self.sequence += 1
        return event

    def _snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.response)

    def start(self) -> list[dict[str, Any]]:
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def keepalive(self) -> dict[str, Any]:
        """A repeated ``response.in_progress`` (the current snapshot, the next sequence number): an
        event the Responses grammar allows at any point of a running response and clients ignore,
        but one their parsers count — Codex's ``stream_idle_timeout_ms`` resets only on those."""
        return self._event("response.in_progress", response=self._snapshot())

    # -- items -------------------------------------------------------------------------------------
    def _open_item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        index = len(self.output)
        self.output.append(item)
        events = [self._event("response.output_item.added", output_index=index, item=copy.deepcopy(item))]
        ids = {"item_id": item["id"], "output_index": index}
        part: dict[str, Any]
        if item["type"] == "reasoning":
            part = {"type": "summary_text", "text": ""}
            events.append(self._event("response.reasoning_summary_part.added", **ids, summary_index=0, part=part))
        elif item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append(self._event("response.content_part.added", **ids, content_index=0, part=part))
        self._open = item
        self._buffer = []
        return events

    def _close(self) -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        index = self.output.index(item)
        ids = {"item_id": item["id"], "output_index": index}
        text = "".join(self._buffer)
        events: list[dict[str, Any]] = []
        part: dict[str, Any]
        if item["type"] == "reasoning":
            part = {"type": "summary_text", "text": text}
            item["summary"] = [part]
            events.append(self._event("response.reasoning_summary_text.done", **ids, summary_index=0, text=text))
            events.append(self._event("response.reasoning_summary_part.done", **ids, summary_index=0, part=part))
        else:
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            item["status"] = "completed"
            events.append(self._event("response.output_text.done", **ids, content_index=0, text=text, logprobs=[]))
            events.append(self._event("response.content_part.done", **ids, content_index=0, part=copy.deepcopy(part)))
        events.append(self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item)))
        return events

    def _ensure_open(self, kind: str) -> list[dict[str, Any]]:
        if self._open is not None and self._open["type"] == kind:
            return []
        events = self._close()
        if kind == "reasoning":
            item: dict[str, Any] = {"id": new_item_id("reasoning"), "type": "reasoning", "summary": []}
        else:
            item = {
                "id": new_item_id("message"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        return events + self._open_item(item)

    def _delta(self, kind: str, text: str) -> list[dict[str, Any]]:
        events = self._ensure_open(kind)
        assert self._open is not None
        self._buffer.append(text)
        ids = {"item_id": self._open["id"], "output_index": len(self.output) - 1}
        if kind == "reasoning":
            events.append(self._event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=text))
        else:
            events.append(self._event("response.output_text.delta", **ids, content_index=0, delta=text, logprobs=[]))
        return events

    def _call(self, call: ToolCall) -> list[dict[str, Any]]:
        events = self._close()
        item: dict[str, Any] = {
            "id": new_item_id("function_call"),
            "type": "function_call",
            "status": "in_progress",
            "name": call.name,
            "arguments": "",
            "call_id": call.id,
        }
        if call.namespace:
            item["namespace"] = call.namespace
        index = len(self.output)
        self.output.append(item)
        ids = {"item_id": item["id"], "output_index": index}
        events.append(self._event("response.output_item.added", output_index=index, item=copy.deepcopy(item)))
        events.append(self._event("response.function_call_arguments.delta", **ids, delta=call.arguments))
        item["arguments"] = call.arguments
        item["status"] = "completed"
        events.append(
            self._event("response.function_call_arguments.done", **ids, name=call.name, arguments=call.arguments)
        )
        events.append(self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item)))
        return events

    # -- the event stream ----------------------------------------------------------------------------
    def feed(self, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, ReasoningDelta):
            return self._delta("reasoning", event.text) if event.text else []
        if isinstance(event, TextDelta):
            return self._delta("message", event.text) if event.text else []
        if isinstance(event, ToolCall):
            return self._call(event)
        return self.finish(event)

    def finish(self, finished: Finished) -> list[dict[str, Any]]:
        events = self._close()
        if not any(item["type"] in ("message", "function_call") for item in self.output):
            events += self._ensure_open("message")  # an answer with no text is an empty message
            events += self._close()
        incomplete = finished.reason == "length"
        self.response.update(
            status="incomplete" if incomplete else "completed",
            completed_at=int(time.time()),
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
            usage=usage_object(finished.usage),
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return [*events, self._event(kind, response=self._snapshot())]

    def completed(self, items: list[dict[str, Any]], usage: Usage) -> list[dict[str, Any]]:
        """The end of a turn that generated nothing token by token: each whole item (a compaction
        turn's one ``compaction`` item; none for a WebSocket warm-up), then ``response.completed``."""
        events: list[dict[str, Any]] = []
        for item in items:
            index = len(self.output)
            self.output.append(item)
            events.append(self._event("response.output_item.added", output_index=index, item=copy.deepcopy(item)))
            events.append(self._event("response.output_item.done", output_index=index, item=copy.deepcopy(item)))
        self.response.update(status="completed", completed_at=int(time.time()), usage=usage_object(usage))
        return [*events, self._event("response.completed", response=self._snapshot())]

    def fail(self, exc: TinyTitanError) -> list[dict[str, Any]]:
        """``response.failed``: the response's ``error.code`` is one of the few the Responses schema
        allows (``server_error``, ``rate_limit_exceeded``, ``invalid_prompt``), not the envelope's code."""
        status, body = openai_error(exc)
        code = "server_error" if status >= 500 else "rate_limit_exceeded" if status == 429 else "invalid_prompt"
        self._open = None
        self.response.update(status="failed", error={"code": code, "message": body["error"]["message"]})
        return [self._event("response.failed", response=self._snapshot())]


class ResponsesStream:
    """The Responses encoding of one generation: the stream events and the object come from the same
    ``OutputBuilder``. ``on_done`` gets the final object of a generation that finished (completed or
    incomplete), on both paths — the route stores it."""

    def __init__(self, builder: OutputBuilder, on_done: Callable[[dict[str, Any]], None]) -> None:
        self.builder = builder
        self.on_done = on_done

    def frames(self, events: list[dict[str, Any]]) -> list[SSE]:
        return [SSE(e, event=e["type"]) for e in events]

    def start(self) -> list[SSE]:
        return self.frames(self.builder.start())

    def feed(self, event: Event) -> list[SSE]:
        frames = self.frames(self.builder.feed(event))
        if isinstance(event, Finished):
            self.on_done(self.builder.response)
        return frames

    def fail(self, exc: TinyTitanError) -> list[SSE]:
        return self.frames(self.builder.fail(exc))

    def end(self) -> list[SSE]:
        return []

    def keepalive(self) -> SSE:
        event = self.builder.keepalive()
        return SSE(event, event=event["type"])

    def object(self, result: Completion) -> dict[str, Any]:
        for event in result.events:
            self.feed(event)
        return self.builder.response


def compaction_item(result: CompactionResult) -> dict[str, Any]:
    """The ``compaction`` item that carries a note (reference §11): a client sends it back as input."""
    payload = result.payload()
    return {"id": new_id("cmp_"), "type": "compaction", "encrypted_content": payload, "created_by": "tinytitan"}


def compaction_object(result: CompactionResult, instructions: str | None) -> dict[str, Any]:
    """``POST /v1/responses/compact``'s answer (reference §11); ``tinytitan compact --json`` prints it too."""
    output: list[dict[str, Any]] = []
    if instructions:
        output.append(
            {
                "id": new_item_id("message"),
                "type": "message",
                "role": "developer",
                "status": "completed",
                "content": [{"type": "input_text", "text": instructions}],
            }
        )
    output.append(compaction_item(result))
    return {
        "id": new_id("resp_cmp_"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": output,
        "usage": usage_object(result.usage),
    }
