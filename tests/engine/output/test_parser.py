"""The shared output parser: channels, tool calls, stop strings across pieces, token attribution."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from tinytitan.engine.events import ReasoningDelta, TextDelta, ToolCall
from tinytitan.engine.output.parser import OutputParser, ParseOptions, partial_suffix
from tinytitan.engine.request import Tool


def run(pieces: list[str], **kwargs: Any) -> tuple[OutputParser, list[Any]]:
    parser = OutputParser(ParseOptions(**kwargs))
    events: list[Any] = []
    for piece in pieces:
        events += parser.feed(piece)
        if parser.stopped:
            break
    events += parser.finish()
    return parser, events


def text_of(events: list[Any], kind: type[TextDelta | ReasoningDelta]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def test_reasoning_text_and_a_call_split_char_by_char() -> None:
    raw = '<think>\nplan it\n</think>\n\nSure.<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    parser, events = run(list(raw))
    assert text_of(events, ReasoningDelta) == "plan it"
    assert text_of(events, TextDelta) == "Sure."
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments) == ("f", '{"a": 1}')
    assert parser.tool_calls == 1


def test_reasoning_tokens_counted_by_channel() -> None:
    parser, _ = run(["<think>", "a", " b", "</think>", "x", " y"])
    assert parser.completion_tokens == 6
    assert parser.reasoning_tokens == 4  # the open marker, two thought tokens and the close marker


def test_prompt_that_opened_a_thought() -> None:
    _, events = run(["deep", " thought", "</think>", "answer"], start_in_reasoning=True)
    assert text_of(events, ReasoningDelta) == "deep thought"
    assert text_of(events, TextDelta) == "answer"


def test_stop_string_matched_across_pieces_and_not_emitted() -> None:
    parser, events = run(["hello wo", "rl", "d and more"], stop=("world",))
    assert text_of(events, TextDelta) == "hello "
    assert parser.stopped == "world"


def test_partial_stop_is_released_when_it_does_not_complete() -> None:
    _, events = run(["ab", "c"], stop=("abd",))
    assert text_of(events, TextDelta) == "abc"


def test_stop_strings_do_not_apply_to_reasoning() -> None:
    parser, events = run(["<think>stop here</think>", "fine"], stop=("stop",))
    assert text_of(events, ReasoningDelta) == "stop here"
    assert text_of(events, TextDelta) == "fine"
    assert parser.stopped is None


def test_unparseable_call_is_shown_as_text() -> None:
    _, events = run(["<tool_call>not json</tool_call>"])
    assert not [e for e in events if isinstance(e, ToolCall)]
    assert text_of(events, TextDelta) == "<tool_call>not json</tool_call>"


def test_unterminated_call_is_parsed_at_the_end() -> None:
    _, events = run(['<tool_call>{"name": "g", "arguments": "{\\"k\\": 2}"}'])
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.name == "g" and call.arguments == '{"k": 2}'


def test_an_unterminated_call_lacking_a_required_argument_was_cut_short_and_is_text() -> None:
    """Issue 28.3: the cap cut a call mid-argument; GLM's lenient parser read it as a call without
    arguments, a forced call violating its schema. It is shown as text (finish: length) instead."""
    needs = Tool("g", parameters={"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]})
    cut = '<tool_call>{"name": "g", "arguments": {"a": 1}}'
    _, events = run([cut], tools=(needs,))
    assert not [e for e in events if isinstance(e, ToolCall)] and text_of(events, TextDelta) == cut
    _, events = run([cut], tools=(replace(needs, parameters={"required": ["a"]}),))
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["g"]  # whole: it has what its tool requires
    _, events = run([cut + "</tool_call>"], tools=(needs,))
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["g"]  # ended by the model: its call as made


def test_namespace_carried_on_calls() -> None:
    _, events = run(['<tool_call>{"name": "read", "arguments": {}}</tool_call>'], namespaces={"read": "fs"})
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.namespace == "fs"


def test_whitespace_framing_calls_is_not_text_but_the_answer_keeps_its_own() -> None:
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    for pieces in ([f"Let me look.\n\n{call}\n{call}\n"], list(f"Let me look.\n\n{call}\n{call}\n")):
        _, events = run(pieces)
        assert text_of(events, TextDelta) == "Let me look."
        assert [e.name for e in events if isinstance(e, ToolCall)] == ["f", "f"]
    _, events = run(list("one\n\ntwo \n"))  # no call follows: every character is the answer's
    assert text_of(events, TextDelta) == "one\n\ntwo \n"
    _, events = run(["a \n", "b", " STOP"], stop=("STOP",))
    assert text_of(events, TextDelta) == "a \nb "


def _apply_patch() -> Tool:
    from tinytitan.engine.grammar.freeform import compile_input
    from tinytitan.engine.request import Freeform
    from tinytitan.testing.freeform import grammar

    source = grammar("codex_apply_patch")
    return Tool("apply_patch", type="custom", format=Freeform("grammar", "lark", source, compile_input("lark", source)))


def test_a_custom_tools_call_carries_its_input_as_the_call() -> None:
    """A custom tool's input travels as the one string argument ``input`` and comes out exactly."""
    import json

    from tinytitan.testing.freeform import PATCH

    body = json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}})
    _, events = run(list(f"<tool_call>\n{body}\n</tool_call>"), tools=(_apply_patch(),))
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert (call.type, call.name, call.arguments) == ("custom", "apply_patch", PATCH)


def test_a_custom_call_whose_input_breaks_its_grammar_is_shown_as_text() -> None:
    import json

    for args in ({"input": "*** Begin Patch\n"}, {"input": 3}, {"input": "x", "more": 1}):
        raw = f"<tool_call>\n{json.dumps({'name': 'apply_patch', 'arguments': args})}\n</tool_call>"
        parser, events = run([raw], tools=(_apply_patch(),))
        assert not [e for e in events if isinstance(e, ToolCall)] and parser.tool_calls == 0
        assert text_of(events, TextDelta) == raw


def _longest_partial(buffer: str, needles: tuple[str, ...]) -> int:
    """``partial_suffix`` by its definition: every suffix length against every needle's prefixes."""
    return max(
        (n for needle in needles for n in range(1, len(needle)) if len(buffer) >= n and buffer.endswith(needle[:n])),
        default=0,
    )


def test_partial_suffix_is_the_longest_suffix_that_begins_a_needle() -> None:
    needles = ("<tool_call>", "</think>", "<<", "STOP", "ab")
    for buffer in ("", "plain text", "text <tool", "text <", "a <<", "<think> </thi", "xx STO", "<tool_call", "a"):
        assert partial_suffix(buffer, needles) == _longest_partial(buffer, needles), buffer
    rng = random.Random(7)
    for _ in range(5000):
        buffer = "".join(rng.choice("<>/ab ") for _ in range(rng.randint(0, 12)))
        some = tuple("".join(rng.choice("<>/ab ") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(0, 3)))
        assert partial_suffix(buffer, some) == _longest_partial(buffer, some), (buffer, some)
    assert partial_suffix("a <", ("",)) == 0  # an empty needle has no proper prefix
