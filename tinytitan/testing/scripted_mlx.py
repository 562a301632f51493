"""A real model that writes exactly the text a test scripts (issue #18).

``ScriptedMlxBackend`` is the ``MlxBackend`` — real template, tokenizer, detokenizer, markers and
tool parser of the model directory — except that while ``script`` is set, every generated token is
masked by a grammar that only accepts that exact text (special tokens as themselves). The random
weights still choose the tokenization; the text, and so what the output parser reads, is fixed. It
drives a family's own output through the whole server on any protocol.
"""

from __future__ import annotations

import re
from typing import Any

from tinytitan.engine.grammar.schema import compile_lark, lark_literal
from tinytitan.engine.models.base import Prompt
from tinytitan.engine.models.mlx import MlxBackend
from tinytitan.engine.request import ValidatedRequest

__all__ = ["ScriptedMlxBackend", "literal_grammar"]


def literal_grammar(text: str, lltokenizer: Any, tokenizer: Any) -> str:
    """A grammar accepting exactly ``text``; the tokenizer's added tokens appear as themselves."""
    from tinytitan.engine.grammar.mask import lark_marker

    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    added = sorted(hf.get_added_vocab(), key=len, reverse=True)
    parts: list[str] = []
    pattern = re.compile("|".join(re.escape(a) for a in added)) if added else None
    pos = 0
    for match in pattern.finditer(text) if pattern else ():
        if match.start() > pos:
            parts.append(lark_literal(text[pos : match.start()]))
        parts.append(lark_marker(lltokenizer, tokenizer, match.group()))
        pos = match.end()
    if pos < len(text):
        parts.append(lark_literal(text[pos:]))
    return compile_lark(f"start: {' '.join(parts) or lark_literal('')}\n")


class ScriptedMlxBackend(MlxBackend):
    """``MlxBackend`` whose generations write ``script`` while it is set."""

    script: str | None = None

    def _grammar_mask(self, request: ValidatedRequest, prompt: Prompt) -> Any:
        if self.script is None:
            return super()._grammar_mask(request, prompt)
        from tinytitan.engine.grammar.mask import GrammarMask

        grammar = literal_grammar(self.script, self.lltokenizer, self.tokenizer)
        return GrammarMask(self.lltokenizer, grammar, self.tokenizer.eos_token_ids)
