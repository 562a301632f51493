"""The scripted backend (``serve --stub SCRIPT.json``), design.md "The scripted backend".

It stands in for a model: the first rule whose ``when`` matches the validated request gives the
reply, which is turned into raw model text in Qwen's format (``<think>``, ``<tool_call>``) and
handed out chunk by chunk by its ``StubBatch`` on the device worker, then parsed by the same output
parser as a real model. Tokens are counted with a
small deterministic tokenizer, so usage is realistic and stable. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tinytitan.engine.device.batch import Batch, Output, Row
from tinytitan.engine.errors import GenerationFailed, Unsupported
from tinytitan.engine.models.base import Backend, Prompt
from tinytitan.engine.models.stub_checks import check_reply
from tinytitan.engine.models.stub_images import describe_images, recorded_image, request_images
from tinytitan.engine.readiness import progress
from tinytitan.engine.request import Image, ModelInfo, Tool, ValidatedRequest
from tinytitan.engine.request.sampling import KNOBS
from tinytitan.jsonfile import read_json

__all__ = ["ScriptError", "StubBackend", "load_script", "stub_tokens"]

_MARK = r"<\|?/?[A-Za-z_]+\|?>"
_TOKEN = re.compile(rf"{_MARK}|\s+(?={_MARK})|\s*\w+|\s*[^\w\s]|\s+")
_IMAGE_MARK = "<|image|>"  # an image in the stub's prompt (one token of its tokenizer)
_WHEN_KEYS = {
    "last_role",
    "last_tool",
    "user_contains",
    "has_tools",
    "model",
    "stream",
    "revealed",
    "images",
    "image_digest",
}
_REPLY_KEYS = {
    "search",
    "text",
    "reasoning",
    "prefill_ms",
    "tool_calls",
    "raw",
    "finish_reason",
    "chunk_size",
    "chunk_delay_ms",
    "fail_after_events",
    "describe_images",
}


class ScriptError(ValueError):
    """A stub script that cannot be used; the message says what and where."""


def stub_tokens(text: str) -> list[str]:
    """The stub's deterministic tokenizer: markers, words with their leading space, punctuation."""
    return _TOKEN.findall(text)


def load_script(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    script = source if isinstance(source, dict) else read_json(source, ScriptError, "stub script ")
    if not isinstance(script, dict) or not isinstance(script.get("rules", []), list):
        raise ScriptError("a stub script is an object with a 'rules' list")
    for i, rule in enumerate(script.get("rules", [])):
        if not isinstance(rule, dict) or not isinstance(rule.get("reply", {}), dict):
            raise ScriptError(f"rules[{i}] must be an object with a 'reply' object")
        unknown = set(rule.get("when", {})) - _WHEN_KEYS
        if unknown:
            raise ScriptError(f"rules[{i}].when has unknown keys: {', '.join(sorted(unknown))}")
        unknown = set(rule.get("reply", {})) - _REPLY_KEYS
        if unknown:
            raise ScriptError(f"rules[{i}].reply has unknown keys: {', '.join(sorted(unknown))}")
    return script


def _last_user_text(request: ValidatedRequest) -> str:
    for turn in reversed(request.turns):
        if turn.role == "user":
            return turn.text
    return ""


def _matches(when: dict[str, Any], request: ValidatedRequest) -> bool:
    if "last_role" in when and request.turns[-1].role != when["last_role"]:
        return False
    if "last_tool" in when and (request.turns[-1].role != "tool" or request.turns[-1].name != when["last_tool"]):
        return False
    if "user_contains" in when and when["user_contains"] not in _last_user_text(request):
        return False
    if "has_tools" in when and bool(request.tools) != bool(when["has_tools"]):
        return False
    if "stream" in when and bool(request.request.stream) != bool(when["stream"]):
        return False
    if "revealed" in when and when["revealed"] not in {t.name for t in request.revealed}:
        return False
    if "images" in when and len(request_images(request)) != int(when["images"]):
        return False
    if "image_digest" in when and not any(
        i.digest.startswith(str(when["image_digest"])) for i in request_images(request)
    ):
        return False
    return not ("model" in when and request.request.model != when["model"])


CLIENT_SEARCH_TOOLS = ("tool_search", "ToolSearch")  # Codex's and Claude Code's own (client-run) searches


def search_call(query: str, request: ValidatedRequest) -> dict[str, Any]:
    """A scripted ``search``: a call to the tool search the request offers — one the server runs (a
    regex ``pattern`` or a ``query``), else a client's own (Codex's ``tool_search``, Claude Code's
    ``ToolSearch``: a ``query``)."""
    for tool in request.tools:
        if tool.search is not None:
            return {"name": tool.name, "arguments": {"pattern" if tool.search == "regex" else "query": query}}
    for tool in request.tools:
        if tool.name in CLIENT_SEARCH_TOOLS:
            return {"name": tool.name, "arguments": {"query": query}}
    raise GenerationFailed("stub script reply searches, but the request offers no tool search")


def raw_reply(reply: dict[str, Any], *, thinking: bool, request: ValidatedRequest | None = None) -> str:
    """The reply in the model family's own text format."""
    if "raw" in reply:
        return str(reply["raw"])
    out = ""
    if reply.get("reasoning") and thinking:
        out += f"<think>\n{reply['reasoning']}\n</think>\n\n"
    out += str(reply.get("text", ""))
    if reply.get("describe_images") and request is not None:
        out += (" " if out else "") + describe_images(request)
    calls = list(reply.get("tool_calls", []))
    if "search" in reply and request is not None:
        calls.insert(0, search_call(str(reply["search"]), request))
    for call in calls:
        body = json.dumps({"name": call["name"], "arguments": _arguments(call)}, ensure_ascii=False)
        out += f"\n<tool_call>\n{body}\n</tool_call>"
    return out


def _arguments(call: dict[str, Any]) -> Any:
    """A scripted call's arguments: a custom tool's ``input`` goes as its one string argument (issue 38)."""
    return {"input": call["input"]} if "input" in call else call.get("arguments", {})


@dataclass
class StubBackend(Backend):
    script: dict[str, Any]
    model_id: str | None = None
    context_override: int | None = None
    recorded: list[dict[str, Any]] = field(default_factory=list)
    _cache: list[list[str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loaded: bool = False

    @property
    def loaded(self) -> bool:
        return self._loaded or not self.script.get("load_ms")

    def load(self) -> None:
        """A script's ``load_ms`` makes the first load take that long, like weights coming in."""
        if not self.loaded:
            progress("loading weights (scripted)")
            time.sleep(float(self.script["load_ms"]) / 1000)
        self._loaded = True

    @property
    def info(self) -> ModelInfo:
        s = self.script
        levels = tuple(s.get("reasoning_levels", ("off", "on")))
        return ModelInfo(
            id=self.model_id or s.get("model", "stub-model"),
            context_window=self.context_override or int(s.get("context_window", 32768)),
            defaults=dict(s.get("generation_config", {})),
            reasoning_levels=levels,
            default_reasoning=s.get("default_reasoning", "on" if "on" in levels else None),
            forced_tool_calls=bool(s.get("forced_tool_calls", False)),
            freeform_grammars=bool(s.get("freeform_grammars", True)),  # it holds scripted inputs to them
            tool_calls=bool(s.get("tool_calls", True)),
            vision=bool(s.get("vision", False)),  # the script's model takes images
        )

    def kv_token_bytes(self) -> int:
        """A script's ``kv_token_bytes``: what one token of context would take (KV memory budget tests)."""
        return int(self.script.get("kv_token_bytes", 0))

    def count_text(self, text: str) -> int:
        if not self.has_tokenizer:
            raise Unsupported("this backend has no tokenizer")
        return len(stub_tokens(text))

    def __post_init__(self) -> None:
        self.has_tokenizer = self.script.get("tokenizer", True) is not False

    def render(self, request: ValidatedRequest) -> Prompt:
        lines: list[str] = []
        system = request.system or ""
        if request.tools:
            tools = [_tool_record(t) for t in request.tools]
            system += "\n\n<tools>\n" + "\n".join(json.dumps(t, sort_keys=True) for t in tools) + "\n</tools>"
        if system:
            lines.append(f"<|im_start|>system\n{system.strip()}<|im_end|>")
        for turn in request.turns:
            body = "".join(p if isinstance(p, str) else _IMAGE_MARK for p in turn.parts) if turn.parts else turn.text
            for call in turn.tool_calls:
                args = json.dumps({"input": call.arguments}) if call.type == "custom" else call.arguments
                body += f'\n<tool_call>\n{{"name": "{call.name}", "arguments": {args}}}\n</tool_call>'
            lines.append(f"<|im_start|>{turn.role}\n{body}<|im_end|>")
        think = "" if request.reasoning_level not in (None, "off") else "<think>\n\n</think>\n\n"
        lines.append(f"<|im_start|>assistant\n{think}")
        text = "\n".join(lines)
        return Prompt(text=text, n_tokens=len(stub_tokens(text)), tokens=stub_tokens(text))

    def _reply_for(self, request: ValidatedRequest) -> dict[str, Any]:
        for rule in self.script.get("rules", []):
            if _matches(rule.get("when", {}), request):
                reply: dict[str, Any] = rule.get("reply", {})
                return reply
        return {"text": "hello from tinytitan"}

    def _record(self, request: ValidatedRequest, prompt: Prompt, max_new: int) -> None:
        r = request.request
        self.recorded.append(
            {
                "request_id": request.request_id,
                "model": r.model,
                "system": request.system,
                "messages": [
                    {
                        "role": t.role,
                        "content": t.text,
                        "tool_calls": [
                            {"id": c.id, "type": c.type, "name": c.name, "arguments": c.arguments} for c in t.tool_calls
                        ],
                        "tool_call_id": t.tool_call_id,
                        **({"images": [recorded_image(p) for p in t.parts if isinstance(p, Image)]} if t.parts else {}),
                    }
                    for t in request.turns
                ],
                "tools": [_recorded_tool(t) for t in request.tools],
                "deferred": [t.name for t in request.deferred],
                "revealed": [t.name for t in request.revealed],
                "tool_choice": request.tool_choice,
                "sampling": {k: getattr(request.sampling, k) for k in (*(knob.name for knob in KNOBS), "seed")},
                "sampling_from": dict(request.sampling_from),
                "stop": list(request.stop),
                "max_new": max_new,
                "reasoning_level": request.reasoning_level,
                "reasoning_requested": {k: v for k, v in asdict(r.reasoning).items() if v is not None},
                "output_format": None if request.output_format is None else request.output_format.type,
                "strip_cli": request.strip_cli,
                "stream": r.stream,
                "prompt": prompt.text,
            }
        )

    def _cached_prefix(self, tokens: list[str]) -> int:
        best = 0
        for previous in self._cache:
            n = 0
            for a, b in zip(previous, tokens, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self._cache = [*self._cache[-3:], tokens]
        return min(best, len(tokens) - 1) if tokens else 0

    def open_batch(self) -> Batch:
        return StubBatch(self)

    def start(self, row: Row) -> _Scripted:
        """A row's scripted reply, checked against its request (``GenerationFailed`` for a bad script)."""
        request = row.request
        with self._lock:
            self._record(row.request, row.prompt, row.max_new)
            cached = self._cached_prefix(list(row.tokens))
        reply = self._reply_for(request)
        check_reply(reply, request)
        tokens = stub_tokens(raw_reply(reply, thinking=request.reasoning_level not in (None, "off"), request=request))
        delay = float(reply.get("chunk_delay_ms", 0)) / 1000
        first = time.monotonic() + float(reply.get("prefill_ms", 0)) / 1000 + delay  # a slow first token
        fail_after = reply.get("fail_after_events")
        return _Scripted(
            row,
            tokens,
            size=max(1, int(reply.get("chunk_size", 1))),
            delay=delay,
            due=first,
            fail_after=None if fail_after is None else int(fail_after),
            finish=str(reply.get("finish_reason") or "stop"),
            cached=cached,
        )


@dataclass(eq=False)
class _Scripted:
    """One row's reply, handed out a chunk per step when it is due."""

    row: Row
    tokens: list[str]
    size: int
    delay: float
    due: float
    fail_after: int | None
    finish: str
    cached: int
    sent: int = 0  # tokens handed out
    chunks: int = 0

    def next(self) -> Output:
        if self.fail_after is not None and self.chunks >= self.fail_after:
            return Output(self.row, error=GenerationFailed("scripted failure (fail_after_events)"))
        end = min(self.sent + self.size, len(self.tokens), self.row.max_new)
        chunk = self.tokens[self.sent : end]
        self.sent, self.chunks = end, self.chunks + 1
        self.due = time.monotonic() + self.delay
        if self.sent >= self.row.max_new:
            return Output(self.row, chunk, finish="length")
        if self.sent >= len(self.tokens):
            return Output(self.row, chunk, finish=self.finish)
        return Output(self.row, chunk)


class StubBatch(Batch):
    """The scripted replies of every running row, each chunk handed out when its delay is over."""

    max_rows = 1 << 30  # the admission queue bounds it

    def __init__(self, backend: StubBackend) -> None:
        self.backend = backend
        self._rows: dict[int, _Scripted] = {}

    @property
    def rows(self) -> int:
        return len(self._rows)

    def add(self, row: Row) -> list[Output]:
        scripted = self.backend.start(row)
        self._rows[row.id] = scripted
        return [Output(row, cached=scripted.cached)]

    def remove(self, row: Row) -> None:
        self._rows.pop(row.id, None)

    def wake_in(self) -> float | None:
        if not self._rows:
            return None
        return max(0.0, min(s.due for s in self._rows.values()) - time.monotonic())

    def step(self) -> list[Output]:
        now = time.monotonic()
        outputs = [s.next() for s in list(self._rows.values()) if s.due <= now]
        for output in outputs:
            if output.last:
                del self._rows[output.row.id]
        return outputs


def _custom_format(tool: Tool) -> dict[str, Any]:
    fmt = tool.format
    if fmt is None or fmt.type == "text":
        return {"type": "text"}
    return {"type": fmt.type, "syntax": fmt.syntax, "definition": fmt.definition}


def _tool_record(tool: Tool) -> dict[str, Any]:
    """A tool as the stub's prompt shows it: a function's schema, or a custom tool's format."""
    if tool.custom:
        return {"name": tool.name, "description": tool.description, "type": "custom", "format": _custom_format(tool)}
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _recorded_tool(tool: Tool) -> dict[str, Any]:
    """A tool as ``/_stub/requests`` records it."""
    if tool.custom:
        return {"name": tool.name, "namespace": tool.namespace, "type": "custom", "format": _custom_format(tool)}
    return {"name": tool.name, "namespace": tool.namespace, "parameters": tool.parameters}
