"""What each model family writes, in its own syntax, and the events that must come of it (issue #18).

``OUTPUTS[family]`` holds up to three raw model outputs: ``call`` (reasoning, text, one call),
``calls`` (several calls in one answer) and ``answer`` (reasoning and a plain answer). Each comes
with what it must turn into: the reasoning, the visible text, and the calls (name, arguments). The
texts follow the families' documented formats (their templates render earlier calls the same way).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["BOUNDED_TOOLS", "OUTPUTS", "TOOLS", "Expected", "Output"]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                    "unit": {"type": "string", "enum": ["C", "F"]},
                },
                "required": ["city", "days"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The time in a zone",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
        },
    },
]


def _bounded(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same tools with every string bounded and no extra keys: a random-weight model forced into a
    call must finish it."""
    out = copy.deepcopy(tools)
    for tool in out:
        params = tool["function"]["parameters"]
        params["additionalProperties"] = False
        for name, prop in params["properties"].items():
            if prop.get("type") == "string" and "enum" not in prop:
                prop.update({"maxLength": 8} if name != "zone" else {"enum": ["CET", "UTC"]})
    return out


BOUNDED_TOOLS = _bounded(TOOLS)

WEATHER = ("get_weather", {"city": "Paris", "days": 2})
TIME = ("get_time", {"zone": "CET"})
THOUGHT = "I need the weather."
TEXT = "Let me check."
ANSWER = "It is sunny."


@dataclass(frozen=True)
class Expected:
    reasoning: str | None
    text: str | None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class Output:
    raw: str
    expected: Expected


def _qwen_call(name: str, args: dict[str, Any]) -> str:
    import json

    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'


_Q = "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"  # noqa: E501
_Q_TIME = "\n<tool_call>\n<function=get_time>\n<parameter=zone>\nCET\n</parameter>\n</function>\n</tool_call>"
_GLM46 = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"  # noqa: E501
_GLM46_TIME = "<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>CET</arg_value>\n</tool_call>"
_GLM47 = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"  # noqa: E501
_GLM47_TIME = "<tool_call>get_time<arg_key>zone</arg_key><arg_value>CET</arg_value></tool_call>"
_GEMMA = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|>'
_GEMMA_TIME = '<|tool_call>call:get_time{zone:<|"|>CET<|"|>}<tool_call|>'
_KIMI = '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|>'  # noqa: E501
_KIMI_TIME = '<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{"zone": "CET"}<|tool_call_end|>'
_SECTION = "<|tool_calls_section_begin|>{}<|tool_calls_section_end|>"
_MISTRAL = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}'
_MISTRAL_TIME = '[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}'
_HARMONY_THOUGHT = f"<|channel|>analysis<|message|>{THOUGHT}<|end|><|start|>assistant"
_HARMONY_CALL = (
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 2}'
)

_ONE = Expected(THOUGHT, TEXT, (WEATHER,))
_ONE_NO_THOUGHT = Expected(None, TEXT, (WEATHER,))
_TWO = Expected(None, None, (WEATHER, TIME))
_ANSWER = Expected(THOUGHT, ANSWER)

OUTPUTS: dict[str, dict[str, Output]] = {
    "qwen3": {
        "call": Output(f"<think>\n{THOUGHT}\n</think>\n\n{TEXT}\n{_qwen_call(*WEATHER)}", _ONE),
        "calls": Output(f"{_qwen_call(*WEATHER)}\n{_qwen_call(*TIME)}", _TWO),
        "answer": Output(f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}", _ANSWER),
    },
    "qwen3-coder": {
        "call": Output(f"{TEXT}\n{_Q}", _ONE_NO_THOUGHT),
        "calls": Output(f"{_Q}{_Q_TIME}", _TWO),
        "answer": Output(ANSWER, Expected(None, ANSWER)),
    },
    "glm-4.6": {
        "call": Output(f"\n<think>{THOUGHT}</think>\n{TEXT}\n{_GLM46}", _ONE),
        "calls": Output(f"\n<think></think>\n{_GLM46}\n{_GLM46_TIME}", _TWO),
        "answer": Output(f"\n<think>{THOUGHT}</think>\n{ANSWER}", _ANSWER),
    },
    "glm-4.7": {  # the generation prompt opens the thought
        "call": Output(f"{THOUGHT}</think>{TEXT}{_GLM47}", _ONE),
        "calls": Output(f"</think>{_GLM47}{_GLM47_TIME}", _TWO),
        "answer": Output(f"{THOUGHT}</think>{ANSWER}", _ANSWER),
    },
    "mistral": {  # Mistral Small 3.2 may write the call id it was shown
        "call": Output(f"{TEXT}{_MISTRAL}", _ONE_NO_THOUGHT),
        "calls": Output(
            _MISTRAL.replace("[ARGS]", "[CALL_ID]a1b2c3d4e[ARGS]")
            + _MISTRAL_TIME.replace("[ARGS]", "[CALL_ID]f5g6h7i8j[ARGS]"),
            _TWO,
        ),
        "answer": Output(ANSWER, Expected(None, ANSWER)),
    },
    "devstral": {
        "call": Output(f"{TEXT}{_MISTRAL}", _ONE_NO_THOUGHT),
        "calls": Output(f"{_MISTRAL}{_MISTRAL_TIME}", _TWO),
        "answer": Output(ANSWER, Expected(None, ANSWER)),
    },
    "gemma-4": {
        "call": Output(f"<|channel>thought\n{THOUGHT}<channel|>{TEXT}{_GEMMA}", _ONE),
        "calls": Output(f"{_GEMMA}{_GEMMA_TIME}", _TWO),
        "answer": Output(f"<|channel>thought\n{THOUGHT}<channel|>{ANSWER}", _ANSWER),
    },
    "llama-3": {  # no parser for its calls: served without tools
        "answer": Output(ANSWER, Expected(None, ANSWER)),
    },
    "gpt-oss": {  # a call ends the turn (<|call|>), so one call per answer
        "call": Output(
            f"{_HARMONY_THOUGHT}<|channel|>commentary<|message|>{TEXT}<|end|><|start|>assistant{_HARMONY_CALL}", _ONE
        ),
        "answer": Output(f"{_HARMONY_THOUGHT}<|channel|>final<|message|>{ANSWER}", _ANSWER),
    },
    "kimi-k2": {
        "call": Output(f"{TEXT}{_SECTION.format(_KIMI)}", _ONE_NO_THOUGHT),
        "calls": Output(_SECTION.format(_KIMI + _KIMI_TIME), _TWO),
        "answer": Output(ANSWER, Expected(None, ANSWER)),
    },
    "kimi-k2-thinking": {
        "call": Output(f"<think>{THOUGHT}</think>{TEXT}{_SECTION.format(_KIMI)}", _ONE),
        "calls": Output(f"<think></think>{_SECTION.format(_KIMI + _KIMI_TIME)}", _TWO),
        "answer": Output(f"<think>{THOUGHT}</think>{ANSWER}", _ANSWER),
    },
}
