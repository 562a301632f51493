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

__all__ = ["FORCEABLE", "HARMONY", "tool_syntax", "wrap_parser"]

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
