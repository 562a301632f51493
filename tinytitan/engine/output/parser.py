"""Raw generated text → reasoning / visible text / tool calls, incrementally.

Every backend's raw output goes through this one parser. The markers and the tool-call parser
come from the model family (mlx-lm's ``TokenizerWrapper`` knows them for a real model; the
scripted backend uses Qwen's). Stop strings apply to the visible channel only and are matched
across piece boundaries: text that could still become a stop string (or a marker) is held back.

A call section may hold several calls (Kimi K2's section, Mistral's repeated ``[TOOL_CALLS]``): the
tool parser may return a list. A family without an end marker (Mistral) keeps its section open to
the end of the answer. A section the parser cannot read is shown as text, never dropped. gpt-oss's
harmony format has its own parser (``tinytitan.engine.output.harmony``) with the same interface.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tinytitan.engine.events import ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.grammar.calls import INPUT

__all__ = [
    "EventParser",
    "Markers",
    "OutputParser",
    "ParseOptions",
    "json_tool_parser",
    "make_call",
    "new_call_id",
    "partial_suffix",
]

_ID_ALPHABET = string.ascii_letters + string.digits

ToolParser = Callable[[str, Any], dict[str, Any]]


def new_call_id() -> str:
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def json_tool_parser(text: str, tools: Any = None) -> dict[str, Any]:
    """Qwen / Hermes style: ``{"name": ..., "arguments": {...}}`` between the call markers."""
    obj = json.loads(text.strip())
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError("a tool call needs a name")
    return {"name": obj["name"], "arguments": obj.get("arguments", {})}


@dataclass(frozen=True, slots=True)
class Markers:
    think_start: str | None = "<think>"
    think_end: str | None = "</think>"
    tool_start: str | None = "<tool_call>"
    tool_end: str | None = "</tool_call>"


QWEN_MARKERS = Markers()


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """What a parser is told of the request whose answer it reads (the same for every family's parser)."""

    stop: tuple[str, ...] = ()  # stop strings: the visible text ends before the first one
    namespaces: Mapping[str, str | None] = field(default_factory=dict)  # tool name → its namespace, for calls
    tools: Any = None  # the request's tools, for a tool parser that reads their schemas
    start_in_reasoning: bool = False  # the prompt opened a thought: the answer starts inside it


NO_OPTIONS = ParseOptions()


class EventParser(Protocol):
    """What generation asks of a parser: ``OutputParser``, or gpt-oss's ``HarmonyParser``."""

    tool_calls: int
    reasoning_tokens: int
    completion_tokens: int

    @property
    def stopped(self) -> str | None: ...  # the stop string that ended the answer

    def feed(self, piece: str, tokens: int = 1) -> list[Any]: ...

    def finish(self) -> list[Any]: ...


class OutputParser:
    """Feed raw pieces with their token counts; collect events; call ``finish`` at the end."""

    def __init__(
        self,
        options: ParseOptions = NO_OPTIONS,
        *,
        markers: Markers = QWEN_MARKERS,
        tool_parser: ToolParser = json_tool_parser,
    ) -> None:
        self.options = options
        self.markers = markers
        self.tool_parser = tool_parser
        self.state = "reasoning" if options.start_in_reasoning else "text"
        self.buffer = ""
        self.tool_buffer = ""
        self.seen_text = False
        self.held = ""  # trailing whitespace of the visible text: shown only if more text follows
        self.reasoning_started = False
        self.stopped: str | None = None  # the stop string that ended the answer
        self.tool_calls = 0
        self.reasoning_tokens = 0
        self.completion_tokens = 0
        # what visible text is searched for: the stop strings, then the family's thought and call markers
        self._candidates = [(stop, "stop") for stop in options.stop]
        self._candidates += [
            (mark, kind) for mark, kind in ((markers.think_start, "reasoning"), (markers.tool_start, "tool")) if mark
        ]
        self._needles = tuple(needle for needle, _ in self._candidates)

    # -- public -------------------------------------------------------------------------------
    def feed(self, piece: str, tokens: int = 1) -> list[Any]:
        before = self.state
        events = self._process(piece)
        self.completion_tokens += tokens
        if "reasoning" in (before, self.state):
            self.reasoning_tokens += tokens
        return events

    def finish(self) -> list[Any]:
        """Flush what was held back at the end of generation."""
        events: list[Any] = []
        if self.stopped is not None:
            return events
        if self.state == "tool":
            # an unterminated call: parse it if it is whole, else show it as text
            events.extend(self._emit_call(self.tool_buffer, raw_prefix=self.markers.tool_start or "", cut=True))
            self.tool_buffer = ""
            self.state = "text"
        if self.buffer:
            if self.state == "reasoning":
                if self.buffer.strip():
                    events.append(
                        ReasoningDelta(self.buffer.rstrip() if self.reasoning_started else self.buffer.strip())
                    )
            else:  # after calls, trailing whitespace only frames them
                events.extend(self._visible(self.buffer, hold=self.tool_calls > 0))
            self.buffer = ""
        elif self.held and self.state == "text" and not self.tool_calls:
            events.extend(self._visible("", hold=False))
        return events

    # -- internals ------------------------------------------------------------------------------
    def _process(self, piece: str) -> list[Any]:
        events: list[Any] = []
        self.buffer += piece
        while self.buffer and self.stopped is None:
            progressed = self._step(events)
            if not progressed:
                break
        return events

    def _step(self, events: list[Any]) -> bool:
        m = self.markers
        if self.state == "reasoning":
            return self._reasoning(events)
        if self.state == "tool":
            end = m.tool_end or ""
            idx = self.buffer.find(end) if end else -1
            if idx < 0:
                keep = partial_suffix(self.buffer, (end,)) if end else 0
                self.tool_buffer += self.buffer[: len(self.buffer) - keep]
                self.buffer = self.buffer[len(self.buffer) - keep :]
                return False
            self.tool_buffer += self.buffer[:idx]
            self.buffer = self.buffer[idx + len(end) :]
            events.extend(self._emit_call(self.tool_buffer, raw_prefix=m.tool_start or "", raw_suffix=end))
            self.tool_buffer = ""
            self.state = "text"
            return True
        # visible text: the earliest of a marker or a stop string
        hit: tuple[int, str, str] | None = None
        for needle, kind in self._candidates:
            idx = self.buffer.find(needle)
            if idx >= 0 and (hit is None or idx < hit[0]):
                hit = (idx, needle, kind)
        if hit is None:
            keep = partial_suffix(self.buffer, self._needles)
            ready = self.buffer[: len(self.buffer) - keep]
            self.buffer = self.buffer[len(self.buffer) - keep :]
            events.extend(self._visible(ready))
            return False
        idx, needle, kind = hit
        events.extend(self._visible(self.buffer[:idx], hold=kind != "stop"))
        self.held = ""  # the whitespace before a thought or a call frames it: not part of the answer
        self.buffer = self.buffer[idx + len(needle) :]
        if kind == "stop":
            self.stopped = needle
            self.buffer = ""
        else:
            self.state = kind
        return True

    def _reasoning(self, events: list[Any]) -> bool:
        """Thought text up to the end marker; the whitespace framing a thought is not part of it."""
        marker = self.markers.think_end
        idx = self.buffer.find(marker) if marker else -1
        if idx >= 0:
            thought = self.buffer[:idx].rstrip()
            self.buffer = self.buffer[idx + len(marker or "") :]
            self.state = "text"
        else:
            keep = partial_suffix(self.buffer, (marker,)) if marker else 0
            ready = self.buffer[: len(self.buffer) - keep]
            thought = ready.rstrip()  # trailing whitespace waits: it may precede the end marker
            self.buffer = ready[len(thought) :] + self.buffer[len(self.buffer) - keep :]
        if not self.reasoning_started:
            thought = thought.lstrip()
        if thought:
            self.reasoning_started = True
            events.append(ReasoningDelta(thought))
        return idx >= 0

    def _visible(self, text: str, *, hold: bool = True) -> list[Any]:
        text, self.held = self.held + text, ""
        if not self.seen_text:
            text = text.lstrip()  # whitespace between thoughts, calls and the answer is not an answer
        if hold:
            shown = text.rstrip()
            text, self.held = shown, text[len(shown) :]
        if not text:
            return []
        self.seen_text = True
        return [TextDelta(text)]

    def _emit_call(self, body: str, *, raw_prefix: str, raw_suffix: str = "", cut: bool = False) -> list[Any]:
        """One call section → its calls (a section may hold several); unparsable → shown as text.

        ``cut``: the answer ended inside the section (the output cap). Where the family closes its calls
        with a marker, such a call is whole only when it carries every argument its tool requires — a
        lenient parser (GLM's) reads a call cut mid-argument as one without arguments."""
        try:
            parsed = self.tool_parser(body, self.options.tools)
            calls = [_call(c) for c in (parsed if isinstance(parsed, list) else [parsed])]
            if not calls:
                raise ValueError("no call")
            if cut and self.markers.tool_end and any(self._lacks_required(c) for c in calls):
                raise ValueError("a call cut short")
            events = [make_call(name, json.loads(arguments), self.options) for name, arguments in calls]
        except (ValueError, KeyError, TypeError, SyntaxError):
            return self._visible(raw_prefix + body + raw_suffix)
        self.tool_calls += len(events)
        return events

    def _lacks_required(self, call: tuple[str, str]) -> bool:
        name, arguments = call
        for tool in self.options.tools or ():
            schema = getattr(tool, "parameters", None)
            if getattr(tool, "name", None) == name and isinstance(schema, dict):
                return bool(set(schema.get("required") or ()) - set(json.loads(arguments)))
        return False


def make_call(name: str, args: dict[str, Any], options: ParseOptions) -> ToolCall:
    """The event of one parsed call. A custom tool's call carries its input as the one string argument
    ``input`` (how every family's syntax writes it, issue 38): that string is the call's input, and it
    must be a sentence of the tool's grammar — else ``ValueError`` (the call is shown as text, as an
    unreadable call is: the input a client receives always parses under the grammar it sent)."""
    tool = next((t for t in options.tools or () if getattr(t, "name", None) == name), None)
    if tool is None or getattr(tool, "type", "function") != "custom":
        return ToolCall(new_call_id(), name, json.dumps(args, ensure_ascii=False), options.namespaces.get(name))
    text = args.get(INPUT)
    if set(args) != {INPUT} or not isinstance(text, str):
        raise ValueError("a custom tool's call carries one string argument, 'input'")
    compiled = getattr(getattr(tool, "format", None), "compiled", None)
    if compiled is not None:
        from tinytitan.engine.grammar.freeform import accepts

        if not accepts(compiled.grammar, text):
            raise ValueError(f"the input of the call of '{name}' does not parse under its grammar")
    return ToolCall(new_call_id(), name, text, options.namespaces.get(name), type="custom")


def _call(parsed: Any) -> tuple[str, str]:
    """(name, arguments as JSON text) of one parsed call."""
    name = parsed["name"]
    args = parsed.get("arguments", {})
    if isinstance(args, str):
        args = json.loads(args) if args.strip() else {}
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        raise ValueError("a call needs a name and object arguments")
    return name, json.dumps(args, ensure_ascii=False)


def partial_suffix(buffer: str, needles: tuple[str, ...]) -> int:
    """Length of the longest buffer suffix that is a proper prefix of any needle."""
    best = 0
    size = len(buffer)
    for needle in needles:
        if not needle:
            continue
        # such a suffix starts with the needle's first character, within the last len(needle) - 1
        at = buffer.find(needle[0], max(size - len(needle) + 1, 0))
        while at >= 0 and size - at > best:
            if needle.startswith(buffer[at:]):
                best = size - at
                break
            at = buffer.find(needle[0], at + 1)
    return best
