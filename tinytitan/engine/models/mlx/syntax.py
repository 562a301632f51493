"""Which tool-call syntax a model speaks, read from its files (issue #18).

mlx-lm's tokenizer wrapper picks a tool parser (``mlx_lm/tool_parsers/<name>.py``) from an explicit
``tool_parser_type`` in ``tokenizer_config.json``, else from markers in the chat template. The same
decision is read here without loading the tokenizer, so the model's facts (can it call tools, can a
call be forced) are known at startup. gpt-oss's harmony format is recognised first: mlx-lm has no
parser for it, ``openai-harmony`` parses it (``tinytitan.engine.output.harmony``).

A model whose syntax nobody here can parse (Llama 3.x, Gemma 3, ...) is served without tools: the
tools are not shown to it, so it cannot make calls that would be lost; startup logs it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tinytitan.engine.grammar.calls import FORCED_SYNTAXES
from tinytitan.engine.mlx_lm_adapter import infer_tool_parser
from tinytitan.engine.models.files import read_json
from tinytitan.engine.output.harmony import is_harmony

__all__ = ["FORCEABLE", "HARMONY", "raw_inputs", "tool_syntax", "wrap_parser"]

log = logging.getLogger("tinytitan.mlx")

HARMONY = "harmony"
FORCEABLE = FORCED_SYNTAXES  # syntaxes a forced call can be written for as a grammar


def tool_syntax(path: Path, template: str) -> str | None:
    """``harmony``, an mlx-lm tool parser's name, or None (no syntax this server can parse)."""
    if is_harmony(template):
        return HARMONY
    declared = read_json(path / "tokenizer_config.json").get("tool_parser_type")
    if isinstance(declared, str) and declared:
        return declared
    return infer_tool_parser(template)


def wrap_parser(syntax: str | None, parse: Any) -> Any:
    """mlx-lm's parser, adjusted where a family's real output does not fit it."""
    if syntax != "mistral" or parse is None:
        return parse
    import re

    call_id = re.compile(r"\[CALL_ID\][A-Za-z0-9]*")

    def mistral(text: str, tools: Any = None) -> Any:
        # Mistral Small 3.2 and later write ``name[CALL_ID]id[ARGS]{...}``; mlx-lm reads the id as the name
        return parse(call_id.sub("", text), tools)

    return mistral


# where a key/value syntax writes a custom tool's input (issue 38) exactly as its template renders it:
# mlx-lm's parsers strip GLM's values and read Qwen3-Coder's "null" as None, which a freeform input
# must survive (a patch that ends with a newline, code that says null)
_RAW_INPUT = {
    "qwen3_coder": r"<parameter=input>\n(.*?)\n</parameter>\n",
    "glm47": r"<arg_key>input</arg_key>\s*<arg_value>(.*?)</arg_value>",
}


def raw_inputs(syntax: str | None, text: str, parsed: Any, custom: set[str]) -> Any:
    """``parsed`` (a call or a list) with each custom tool's ``input`` read again from ``text`` as
    written, where this syntax's parser would change it."""
    import re

    pattern = _RAW_INPUT.get(syntax or "")
    if pattern is None or not custom:
        return parsed
    calls = parsed if isinstance(parsed, list) else [parsed]
    found = [m.group(1) for m in re.finditer(pattern, text, re.DOTALL)]
    for call in calls:
        if isinstance(call, dict) and call.get("name") in custom and len(calls) == len(found) == 1:
            call["arguments"] = {**(call.get("arguments") or {}), "input": found[0]}
    return parsed
