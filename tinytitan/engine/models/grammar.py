"""The grammar a request needs from a model family: a forced tool call or structured output (issue #6).

``grammar_for`` decides it: a forced tool call (the family's own call syntax with the tool's schema
for the arguments, or a custom tool's input grammar, issue 38) or the compiled structured-output
grammar, or None for free text; ``check_forced`` refuses, before a stream opens, a forced call the
family's syntax cannot promise. ``chosen_calls`` gives, for a request that lets the model choose, the
head and call grammar of each custom tool with a grammar: ``grammar/trigger.py``'s mask holds a call
to it once the model starts one. The mask that enforces a grammar is ``grammar/mask.py``'s.
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.errors import GenerationFailed, InvalidRequest
from tinytitan.engine.grammar.calls import (
    ANY_TEXT,
    FORCED_SYNTAXES,
    FreeformInput,
    ToolSpec,
    answer_prefix,
    call_head,
    forced_call_grammar,
)
from tinytitan.engine.grammar.mask import lark_marker
from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, lark_literal, schema_grammar
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import Tool, ValidatedRequest, tool_source

__all__ = ["ENDS_ANSWER", "check_forced", "chosen_calls", "grammar_for", "mask_for", "tool_spec"]

ENDS_ANSWER = frozenset({"mistral", "harmony"})  # syntaxes whose call ends only with the answer


def tool_spec(tool: Tool) -> ToolSpec:
    """What a call grammar needs of a tool: its name and schema, or a custom tool's input regex."""
    if not tool.custom:
        return tool.name, tool.parameters
    compiled = tool.format.compiled if tool.format is not None else None
    return tool.name, FreeformInput(compiled.regex if compiled is not None else ANY_TEXT)


def grammar_for(
    request: ValidatedRequest,
    prompt: Prompt,
    lltokenizer: Any,
    tokenizer: Any,
    *,
    syntax: str | None = "json_tools",
    newlines: bool = False,
) -> str | None:
    """The llguidance grammar this generation must follow, or ``None`` for free text.

    ``syntax`` is the family's call syntax (``tinytitan.engine.grammar.calls``); ``newlines`` whether
    its key/value calls put each pair on a line (GLM-4.5 / 4.6).
    """
    forced = request.tool_choice in ("required", "function")
    fmt = request.output_format
    if not forced and fmt is None:
        return None

    def marker(text: str) -> str:
        return lark_marker(lltokenizer, tokenizer, text)

    heads: list[str] = []
    if prompt.start_in_reasoning and tokenizer.think_end:
        # the template opened a thought it cannot switch off: close it before the constrained part
        heads.append(f'{marker(tokenizer.think_end)} "\\n\\n"')
    try:
        if forced:
            if syntax not in FORCED_SYNTAXES:
                raise GenerationFailed("this model's tool-call syntax cannot be forced")
            wanted = request.forced_tool
            tools = [tool_spec(t) for t in request.callable_tools if wanted is None or t.name == wanted]
            prefix = " ".join(heads) or None
            return forced_call_grammar(syntax, tools, marker, prefix=prefix, newlines=newlines)
        assert fmt is not None
        if answer := answer_prefix(syntax, marker):
            heads.append(answer)
        if not heads and fmt.grammar is not None:
            return fmt.grammar
        schema = fmt.schema if fmt.schema is not None else JSON_OBJECT_SCHEMA
        return schema_grammar(schema, " ".join(heads) or None)
    except ValueError as exc:
        raise GenerationFailed(f"cannot build the output grammar: {exc}") from exc


def check_forced(syntax: str, request: ValidatedRequest) -> None:
    """A forced call whose schema this family's call syntax cannot promise is a 400 naming the tool."""

    for i, tool in enumerate(request.callable_tools):
        if request.forced_tool is not None and tool.name != request.forced_tool:
            continue
        try:
            forced_call_grammar(syntax, [tool_spec(tool)], lark_literal)
        except ValueError as exc:
            raise InvalidRequest(
                f"a forced call cannot promise this schema in this model's call syntax: {exc}",
                param=tool_source(tool, i).at("parameters"),
                code="unsupported_value",
            ) from exc


def chosen_calls(
    request: ValidatedRequest, lltokenizer: Any, tokenizer: Any, *, syntax: str | None, newlines: bool = False
) -> list[tuple[str, str]]:
    """(call head, call grammar) of each custom tool with a grammar the model may choose to call; none
    when the model is forced or answers in a format, or its syntax has no call grammars."""
    if request.tool_choice != "auto" or request.output_format is not None or syntax not in FORCED_SYNTAXES:
        return []
    assert syntax is not None

    def marker(text: str) -> str:
        return lark_marker(lltokenizer, tokenizer, text)

    calls: list[tuple[str, str]] = []
    for tool in request.tools:
        if tool.custom and tool.format is not None and tool.format.compiled is not None:
            try:
                grammar = forced_call_grammar(syntax, [tool_spec(tool)], marker, newlines=newlines)
            except ValueError as exc:
                raise GenerationFailed(f"cannot build the call grammar of '{tool.name}': {exc}") from exc
            calls.append((call_head(syntax, tool.name, newlines=newlines), grammar))
    return calls


def mask_for(
    request: ValidatedRequest, prompt: Prompt, lltokenizer: Any, tokenizer: Any, *, syntax: str | None, newlines: bool
) -> Any:
    """The logits processor a generation needs: the grammar's mask from the first token (structured
    output, a forced call), the triggered mask of the custom tools a chosen call is held to, or None."""
    from tinytitan.engine.grammar.mask import GrammarMask
    from tinytitan.engine.grammar.trigger import TriggeredMask

    if request.output_format is None and request.tool_choice not in ("required", "function"):
        calls = chosen_calls(request, lltokenizer, tokenizer, syntax=syntax, newlines=newlines)
        if not calls:
            return None
        return TriggeredMask(lltokenizer, calls, tokenizer.eos_token_ids, ends_answer=syntax in ENDS_ANSWER)
    grammar = grammar_for(request, prompt, lltokenizer, tokenizer, syntax=syntax, newlines=newlines)
    return None if grammar is None else GrammarMask(lltokenizer, grammar, tokenizer.eos_token_ids)
