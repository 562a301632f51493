"""The grammar a request needs from a model family: a forced tool call or structured output (issue #6).

``grammar_for`` decides it: a forced tool call (the family's own call syntax with the tool's schema
for the arguments) or the compiled structured-output grammar, or None for free text;
``check_forced`` refuses, before a stream opens, a forced call the family's syntax cannot promise.
The mask that enforces a grammar is ``grammar/mask.py``'s.
"""

from __future__ import annotations

from typing import Any

from tinytitan.engine.errors import GenerationFailed, InvalidRequest
from tinytitan.engine.grammar.calls import FORCED_SYNTAXES, answer_prefix, forced_call_grammar
from tinytitan.engine.grammar.mask import lark_marker
from tinytitan.engine.grammar.schema import JSON_OBJECT_SCHEMA, lark_literal, schema_grammar
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.request import ValidatedRequest, tool_source

__all__ = ["check_forced", "grammar_for"]


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
            tools = [(t.name, t.parameters) for t in request.tools if wanted is None or t.name == wanted]
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

    for i, tool in enumerate(request.tools):
        if request.forced_tool is not None and tool.name != request.forced_tool:
            continue
        try:
            forced_call_grammar(syntax, [(tool.name, tool.parameters)], lark_literal)
        except ValueError as exc:
            raise InvalidRequest(
                f"a forced call cannot promise this schema in this model's call syntax: {exc}",
                param=tool_source(tool, i).at("parameters"),
                code="unsupported_value",
            ) from exc
