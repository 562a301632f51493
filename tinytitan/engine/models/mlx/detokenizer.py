"""Token ids → text for the mlx backend's ``Job``: mlx-lm's streaming detokenizer behind our ``Decoder``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinytitan.engine.models.base import Decoder

__all__ = ["Detokenizer"]


class Detokenizer(Decoder):
    """mlx-lm's streaming detokenizer (multi-byte characters wait for their last token)."""

    def __init__(self, detokenizer: Any) -> None:
        self._detokenizer = detokenizer

    def feed(self, tokens: Sequence[Any]) -> str:
        text = []
        for token in tokens:
            self._detokenizer.add_token(token)
            text.append(self._detokenizer.last_segment)
        return "".join(text)

    def finish(self) -> str:
        self._detokenizer.finalize()
        return str(self._detokenizer.last_segment)
