"""The model's own chat template: finding it, reading its reasoning levels, building its inputs.

Reference §5: a template that mentions ``enable_thinking`` renders ``off, on``; one that takes
``reasoning_effort`` renders ``off`` plus the effort names it accepts; neither renders only its
default. A ``tinytitan.json`` beside the weights may declare ``reasoning_levels`` and
``default_reasoning`` instead. Rendering itself goes through the tokenizer's
``apply_chat_template`` (jinja2, as Hugging Face does); this module builds its messages, tools
and thinking switch. No mlx import here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinytitan.engine.grammar.calls import INPUT
from tinytitan.engine.models.files import ModelUnavailable, read_json
from tinytitan.engine.request import Tool, ToolCall, ValidatedRequest
from tinytitan.engine.request.reasoning import LADDER

__all__ = [
    "Levels",
    "detect_levels",
    "ends_in_open_thought",
    "read_levels",
    "read_template",
    "template_messages",
    "template_tools",
    "thinking_kwargs",
]

_EFFORTS = LADDER[2:]
_DEFAULT_EFFORTS = ("low", "medium", "high")
_QUOTED = re.compile(r"""["']([a-z]+)["']""")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class Levels:
    levels: tuple[str, ...]
    default: str | None


def read_template(path: Path) -> str:
    """The template source (every named template, joined, for detection); missing → startup error."""
    jinja = path / "chat_template.jinja"
    if jinja.exists():
        return jinja.read_text(encoding="utf-8")
    for name in ("tokenizer_config.json", "chat_template.json"):
        template = read_json(path / name).get("chat_template")
        if isinstance(template, str) and template.strip():
            return template
        if isinstance(template, list):  # named templates: [{"name", "template"}]
            parts = [t.get("template", "") for t in template if isinstance(t, dict)]
            if any(parts):
                return "\n".join(parts)
    raise ModelUnavailable(
        f"{path} has no chat template: expected {jinja.name} or a 'chat_template' entry in "
        f"{path / 'tokenizer_config.json'}"
    )


def detect_levels(template: str) -> tuple[str, ...]:
    """The reasoning levels a template renders (reference §5)."""
    if "reasoning_effort" in template:
        quoted: set[str] = set()
        for m in re.finditer("reasoning_effort", template):
            quoted.update(_QUOTED.findall(template[m.start() : m.end() + 400]))
        efforts = tuple(e for e in _EFFORTS if e in quoted)
        if len(efforts) < 2:  # only a default ("medium"): the template takes any effort word
            efforts = tuple(e for e in _EFFORTS if e in {*efforts, *_DEFAULT_EFFORTS})
        return ("off", *efforts)
    if "enable_thinking" in template:
        return ("off", "on")
    return ()


def _default_for(levels: tuple[str, ...]) -> str | None:
    if not levels:
        return None
    if "on" in levels:
        return "on"
    efforts = [lvl for lvl in levels if lvl not in ("off", "on")]
    if "medium" in efforts:
        return "medium"
    return efforts[len(efforts) // 2] if efforts else levels[0]


def read_levels(path: Path, template: str) -> Levels:
    """Levels from the template, unless ``tinytitan.json`` beside the weights declares them."""
    declared = read_json(path / "tinytitan.json")
    levels = detect_levels(template)
    if "reasoning_levels" in declared:
        raw = declared["reasoning_levels"]
        if not isinstance(raw, list) or any(lvl not in LADDER for lvl in raw):
            raise ModelUnavailable(
                f"{path / 'tinytitan.json'}: reasoning_levels must be a list drawn from {', '.join(LADDER)}"
            )
        levels = tuple(lvl for lvl in LADDER if lvl in raw)  # ladder order, no duplicates
    default = _default_for(levels)
    if "default_reasoning" in declared:
        default = declared["default_reasoning"]
        if default is not None and default not in LADDER:
            raise ModelUnavailable(f"{path / 'tinytitan.json'}: default_reasoning must be one of {', '.join(LADDER)}")
    return Levels(levels, default)


def thinking_kwargs(level: str | None, levels: tuple[str, ...]) -> dict[str, Any]:
    """The template variables for an applied level (none when the model has no switch).

    ``off`` on an effort-only template (gpt-oss: no switch, ``Reasoning: low|medium|high``) renders
    its cheapest effort too, since ``enable_thinking`` means nothing to it.
    """
    if not levels or level is None:
        return {}
    if level == "off":
        efforts = [lvl for lvl in levels if lvl not in ("off", "on")]
        return {"enable_thinking": False, **({"reasoning_effort": efforts[0]} if efforts else {})}
    if level == "on":
        return {"enable_thinking": True}
    return {"enable_thinking": True, "reasoning_effort": level}


def _input_schema(tool: Tool) -> dict[str, Any]:
    """A custom tool as a template sees it (issue 38): one string argument, ``input`` — its grammar
    said in the argument's description, so a model knows what to write."""
    fmt = tool.format
    if fmt is not None and fmt.type == "grammar":
        said = f"The tool's whole input, as raw text in this {fmt.syntax} grammar:\n{fmt.definition}"
    else:
        said = "The tool's whole input, as raw text."
    text = {"type": "string", "description": said}
    return {"type": "object", "properties": {INPUT: text}, "required": [INPUT]}


def _parameters(tool: Tool) -> dict[str, Any]:
    return tool.parameters if tool.parameters is not None else _EMPTY_SCHEMA


def template_tools(tools: tuple[Tool, ...]) -> list[dict[str, Any]] | None:
    """Tools in the OpenAI function-tool shape templates expect (a custom tool: ``_input_schema``)."""
    if not tools:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description or "",
                "parameters": _input_schema(t) if t.custom else _parameters(t),
            },
        }
        for t in tools
    ]


def _arguments(call: ToolCall) -> Any:
    if call.type == "custom":
        return {INPUT: call.arguments}  # a custom tool's input: its one string argument
    text = call.arguments
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text  # the validator already refuses this; render it as it came


def _template_id(template: str) -> Callable[[str | None], str | None]:
    """Call ids as the template accepts them: Mistral's templates refuse any but 9 alphanumerics."""
    if "length != 9" not in template:
        return lambda call_id: call_id
    return lambda call_id: None if call_id is None else hashlib.sha256(call_id.encode()).hexdigest()[:9]


def template_messages(request: ValidatedRequest, template: str = "") -> list[dict[str, Any]]:
    """The system text and turns as template messages.

    Tool-call arguments go as dicts (templates iterate or ``tojson`` them); ids as the template
    accepts them; an assistant turn's earlier thoughts as ``reasoning_content`` (Hugging Face copies
    it to ``thinking`` for gpt-oss, whose template refuses a thought beside text and a call: there the
    text, which it renders as the analysis, goes alone). The template decides what to render.
    """
    call_id = _template_id(template)
    reads_thinking = "message.thinking" in template
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for turn in request.turns:
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.reasoning and not (reads_thinking and turn.tool_calls and turn.text):
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id(c.id),
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c)},
                }
                for c in turn.tool_calls
            ]
        if turn.role == "tool":
            message["tool_call_id"] = call_id(turn.tool_call_id)
            if turn.name:
                message["name"] = turn.name
        messages.append(message)
    return messages


def ends_in_open_thought(text: str, think_start: str | None) -> bool:
    """Whether the rendered prompt ends inside an opened think block (the template opened it)."""
    return bool(think_start) and text.rstrip().endswith(think_start or "")
